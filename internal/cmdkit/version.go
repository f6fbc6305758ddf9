package cmdkit

// Version is Corral's version, reported by /orchestrator/status and by
// corral version.
const Version = "0.1.0-dev"
