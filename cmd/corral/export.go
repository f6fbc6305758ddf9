package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/export"
)

// newExportCmd is `corral export slurm|k8s|pbs JOB`: the job as another
// scheduler's job (internal/export).
func (c *cli) newExportCmd() *cobra.Command {
	var image string
	cmd := &cobra.Command{
		Use:   "export slurm|k8s|pbs JOB",
		Short: "Print a job as an sbatch script, Kubernetes Pods or a PBS script",
		Long: `corral export prints the job (GET /jobs/{id}) as the equivalent job of another
scheduler, to move work to another cluster:

  slurm  an sbatch script: --nodes, --gres=gpu[:TYPE]:N, --time, --mem,
         --cpus-per-task, one srun task per node
  k8s    the Pods (YAML) that corral server --executor k8s submits: one per
         node, nvidia.com/gpu limits, the job's node_labels and GPU type as
         nodeSelector, Corral's variables; several nodes: a headless
         Service named CORRAL_MASTER_ADDR
  pbs    a PBS Pro script: -l select=NODES:ngpus=N:ncpus:mem, walltime,
         pbsdsh per node

Corral's rank variables (CORRAL_NODE_RANK, CORRAL_NUM_NODES,
CORRAL_MASTER_ADDR, ...) are set from the target's own. What the target
cannot take (priority, project, dependencies) is written as comments.`,
		Example: `  corral export slurm j01h8x... > job.sbatch && sbatch job.sbatch
  corral export k8s --image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime j01h8x... | kubectl apply -f -`,
		Args: argsExactly(2, "the format (slurm, k8s or pbs) and the job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(export.Formats, args[0]) {
				return usagef("export format %q: want slurm, k8s or pbs", args[0])
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			job, err := cl.Job(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			out, err := export.Write(args[0], job, export.Options{Image: image})
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "k8s: the container image of a job that names none (default "+export.DefaultImage+", marked as a placeholder)")
	return cmd
}
