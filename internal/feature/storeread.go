package feature

import "time"

// StoreReadTimeout bounds one read of the store that a feature or the
// loop makes for the API (an ended job, ids by prefix, a job's number):
// a store that does not answer fails the read, not the request forever.
const StoreReadTimeout = 5 * time.Second
