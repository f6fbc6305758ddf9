package server

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// benchSubmitBody is a typical POST /queue/submit body: a few strings,
// an environment, labels and numbers.
const benchSubmitBody = `{"name":"train-llama-7b","user":"alice","project":"nlp","command":"torchrun --nproc_per_node=4 train.py --config configs/llama7b.yaml --out /data/runs/$CORRAL_JOB_ID","workdir":"/home/alice/llm","env":{"HF_HOME":"/data/hf","WANDB_PROJECT":"llama","NCCL_DEBUG":"WARN","OMP_NUM_THREADS":"8"},"gpu_count":4,"gpu_memory_gb":40,"gpu_type":"A100","priority":"high","estimated_duration":"6h","time_limit":"12h","max_retries":2,"node_labels":{"rack":"r12","fabric":"ib"}}`

// BenchmarkCheckJSONSubmit measures checkJSON on a typical submit body;
// BenchmarkUnmarshalSubmit, the decode that follows it, is its baseline.
func BenchmarkCheckJSONSubmit(b *testing.B) {
	body, typ := []byte(benchSubmitBody), reflect.TypeOf(&api.SubmitRequest{})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := checkJSON(body, typ); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalSubmit(b *testing.B) {
	body := []byte(benchSubmitBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var req api.SubmitRequest
		if err := json.Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}
