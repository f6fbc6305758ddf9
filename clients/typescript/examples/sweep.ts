// A 20-point learning-rate sweep: submit every point, wait for them all,
// print the best. Each job prints "loss <value>" as its last line.
// Build and run (from clients/): npx tsc -p typescript && node typescript/dist/examples/sweep.js
import { CorralClient } from "../src/client.js";

declare const process: { env: Record<string, string | undefined> };

const client = new CorralClient({
  server: process.env.CORRAL_SERVER ?? "http://127.0.0.1:7450",
  token: process.env.CORRAL_TOKEN,
});

const rates = Array.from({ length: 20 }, (_, i) => 10 ** (-5 + i / 5));
const submitted = await Promise.all(
  rates.map((lr) =>
    client.submit({
      name: "lr-sweep",
      command: `echo "loss $(awk 'BEGIN { d = ${lr} - 0.001; print d < 0 ? -d : d }')"`,
      gpu_count: Number(process.env.SWEEP_GPUS ?? "1"),
      env: { LR: String(lr) },
    }),
  ),
);
const ended = await Promise.all(submitted.map((j) => client.wait(j.id, { intervalMs: 500 })));
let best: { lr: number; loss: number } | undefined;
for (const [i, job] of ended.entries()) {
  if (job.state !== "completed") continue;
  const m = /loss ([0-9.eE+-]+)\s*$/.exec(await client.logs(job.id));
  const loss = m ? Number(m[1]) : NaN;
  if (!Number.isNaN(loss) && (best === undefined || loss < best.loss)) best = { lr: rates[i], loss };
}
console.log(best ? `best: lr=${best.lr} loss=${best.loss}` : "no point completed");
