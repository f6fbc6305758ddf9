#!/usr/bin/env bash
# Chaos: replays the failure families of an unlucky operator and an
# adversarial user against a fresh build of corral, on 127.0.0.1 only,
# and prints what survived:
#
#   kill   kill -9 of `corral up` at random instants under a submission load
#          (jobs that end just before a kill, jobs being placed, jobs queued)
#   stop   SIGSTOP of `corral up`, and of `corral server` beside an agent,
#          for three node TTLs while jobs run
#   disk   the data dir on a small tmpfs filled to ENOSPC for three TTLs
#          while jobs run (root only; skipped otherwise)
#   read   a large store read (GET /jobs?limit=1000 over ended jobs) while
#          submissions go on: the worst submission latency during it
#   conn   stalled connections: unauthenticated bodies that never come,
#          idle keep-alives, then a real client
#   big    impossible and oversized input: far-future bookings, huge
#          durations, megabyte commands and environments; the server's
#          memory before and after listings
#
# Each family starts its own corral with a data dir of its own and stops it.
# The figures (acknowledged, lost, duplicated, ran twice, misread, killed by
# a stall, refused) go to stdout as a table and to OUT/chaos.json; the exit
# status is 1 when any job was lost, duplicated, ran twice, was misread or
# was killed by a stall, or any impossible input was accepted.
#
# Usage: scripts/chaos.sh [-b CORRAL] [-o OUT] [-f kill,stop,disk,read,conn,big]
#                         [-s SEED] [-k KILLS]
# Without -b it builds ./cmd/corral. Run as root to test the disk family and
# to run jobs as a Unix account of their own (corral up without --run-as
# agent, as on a shared box; the account corralchaos is made if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

bin= out= families=kill,stop,disk,read,conn,big seed=$RANDOM kills=8
while getopts b:o:f:s:k: opt; do
  case $opt in
    b) bin=$OPTARG ;; o) out=$OPTARG ;; f) families=$OPTARG ;; s) seed=$OPTARG ;; k) kills=$OPTARG ;;
    *) sed -n '2,30p' "$0"; exit 2 ;;
  esac
done
out=${out:-$(mktemp -d /tmp/corral-chaos.XXXXXX)}
mkdir -p "$out"
if [ -z "$bin" ]; then
  echo "building corral..." >&2
  go build -o "$out/corral" ./cmd/corral
  bin=$out/corral
fi
command -v python3 >/dev/null || { echo "chaos.sh needs python3" >&2; exit 2; }
export CHAOS_BIN=$(readlink -f "$bin") CHAOS_OUT=$(readlink -f "$out") CHAOS_FAMILIES=$families CHAOS_SEED=$seed CHAOS_KILLS=$kills
echo "seed $seed (rerun with -s $seed); output in $out" >&2
exec python3 -u - <<'PY'
import json, os, random, resource, signal, socket, subprocess, sys, threading, time
import urllib.request, urllib.error

BIN, OUT = os.environ["CHAOS_BIN"], os.environ["CHAOS_OUT"]
FAMILIES = os.environ["CHAOS_FAMILIES"].split(",")
rng = random.Random(int(os.environ["CHAOS_SEED"]))
KILLS = int(os.environ["CHAOS_KILLS"])
ROOT = os.geteuid() == 0
USER = None
results = {}

def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def account():
    """A Unix account for the jobs, as on a shared box (root only)."""
    if not ROOT:
        return None
    if subprocess.run(["id", "corralchaos"], capture_output=True).returncode != 0:
        if subprocess.run(["useradd", "-m", "corralchaos"], capture_output=True).returncode != 0:
            return None
    return "corralchaos"

class Corral:
    """One corral (up, or server + agent) on a data dir of its own."""
    def __init__(self, name, ttl="30s", split=False, data=None, extra=()):
        self.name, self.ttl, self.split, self.extra = name, ttl, split, list(extra)
        self.dir = os.path.join(OUT, name)
        self.data = data or os.path.join(self.dir, "data")
        os.makedirs(self.data, exist_ok=True)
        os.makedirs(os.path.join(self.dir, "marks"), exist_ok=True)
        os.chmod(os.path.join(self.dir, "marks"), 0o1777)
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.procs = {}
        self.token = None

    def args(self, what):
        common = ["--listen", "127.0.0.1:%d" % self.port, "--node-ttl", self.ttl]
        if what == "up":
            a = [BIN, "up", "--simulate-gpus", "8", "--data-dir", self.data, "--node-name", "n1", "--heartbeat", "1s"] + common
            if USER is None and ROOT:
                a += ["--run-as", "agent"]
            return a + self.extra
        if what == "server":
            return [BIN, "server", "--data-dir", self.data, "--heartbeat", "1s"] + common + self.extra
        return [BIN, "agent", "--server", self.url, "--simulate-gpus", "8", "--node-name", "n1", "--interval", "1s",
                "--data-dir", os.path.join(self.dir, "agent")] + (["--run-as", "agent"] if USER is None and ROOT else [])

    def start(self, what=None):
        whats = [what] if what else (["server", "agent"] if self.split else ["up"])
        for w in whats:
            env = dict(os.environ)
            if w == "agent":
                env["CORRAL_JOIN_TOKEN"] = open(os.path.join(self.data, "join.token")).read().strip()
            logf = open(os.path.join(self.dir, w + ".log"), "ab")
            self.procs[w] = subprocess.Popen(self.args(w), stdout=logf, stderr=logf, env=env, start_new_session=True)
            if w != "agent":
                self.wait_healthy()
        if self.token is None:
            admin = open(os.path.join(self.data, "admin.token")).read().strip()
            self.admin = admin
            if USER:
                code, t = self.call("POST", "/auth/tokens", {"user": USER, "role": "user"}, token=admin)
                self.token = t["token"]
            else:
                self.token = admin
        self.wait_nodes()

    def wait_healthy(self, limit=60):
        end = time.time() + limit
        while time.time() < end:
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=2).read()
                return
            except Exception:
                time.sleep(0.05)
        raise SystemExit("%s: corral did not answer /healthz in %ds (see %s)" % (self.name, limit, self.dir))

    def wait_nodes(self, limit=60):
        end = time.time() + limit
        while time.time() < end:
            code, c = self.call("GET", "/cluster/gpu-status", token=self.admin)
            if code == 200 and any(n.get("state") == "up" for n in (c.get("nodes") if isinstance(c, dict) else None) or []):
                return
            time.sleep(0.1)
        raise SystemExit("%s: no node came up in %ds" % (self.name, limit))

    def call(self, method, path, body=None, token=None, timeout=30, headers=None):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + (token or self.token))
        req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except Exception:
                return e.code, raw.decode(errors="replace")

    def kill9(self, what="up"):
        p = self.procs[what]
        p.send_signal(signal.SIGKILL); p.wait()

    def stop(self):
        for w in reversed(list(self.procs)):
            p = self.procs[w]
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill(); p.wait()
        # Nothing of the jobs may be left behind.
        subprocess.run(["pkill", "-9", "-f", "corral-chaos-job-" + self.name], capture_output=True)

    def rss_mb(self, what="up"):
        try:
            for line in open("/proc/%d/status" % self.procs[what].pid):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return -1

    def job(self, jid):
        return self.call("GET", "/jobs/" + jid, token=self.admin)

    def settle(self, ids, limit=180):
        """Waits until every job is terminal; returns {id: job}."""
        end, jobs = time.time() + limit, {}
        pending = set(ids)
        while pending and time.time() < end:
            for jid in list(pending):
                code, j = self.job(jid)
                if code == 200 and j["state"] in ("completed", "failed", "canceled"):
                    jobs[jid] = j; pending.discard(jid)
                elif code == 404:
                    jobs[jid] = None; pending.discard(jid)
            if pending:
                time.sleep(0.25)
        for jid in pending:
            code, j = self.job(jid)
            jobs[jid] = j if code == 200 else None
        return jobs

    def marks(self, jid):
        try:
            return open(os.path.join(self.dir, "marks", jid)).read().split("\n")
        except FileNotFoundError:
            return []

def job_cmd(c, secs, code):
    # The job marks its start and its end (with the exit code it is about
    # to return) in a file of its own; the tag names the family for pkill.
    m = os.path.join(c.dir, "marks")
    return ('echo start >> %s/$CORRAL_JOB_ID; sleep %.3f; echo "end %d" >> %s/$CORRAL_JOB_ID; '
            ': corral-chaos-job-%s; exit %d') % (m, secs, code, m, c.name, code)

# ---------------------------------------------------------------- kill
def family_kill():
    c = Corral("kill")
    c.start()
    acked, lock, stop = {}, threading.Lock(), threading.Event()
    refused = [0]
    def submitter():
        n = 0
        while not stop.is_set():
            n += 1
            key = "chaos-%d" % n
            code = rng.choice([0, 0, 3])
            body = {"command": job_cmd(c, rng.uniform(0.01, 0.6), code), "gpu_count": rng.choice([0, 1, 1, 2]),
                    "max_retries": rng.choice([0, 0, 2]), "name": key}
            while not stop.is_set():  # the same key until it is answered
                try:
                    st, j = c.call("POST", "/queue/submit", body, headers={"Idempotency-Key": key}, timeout=10)
                except Exception:
                    time.sleep(0.05); continue
                if st in (200, 201):
                    with lock:
                        if key in acked and acked[key]["id"] != j["id"]:
                            acked[key]["dup"] = j["id"]
                        acked.setdefault(key, {"id": j["id"], "code": code, "retries": body["max_retries"]})
                    break
                if st == 429 or st == 503:
                    refused[0] += 1; time.sleep(0.1); continue
                raise SystemExit("kill: submission answered %s: %s" % (st, j))
            time.sleep(rng.uniform(0, 0.02))
    t = threading.Thread(target=submitter, daemon=True); t.start()
    for k in range(KILLS):
        time.sleep(rng.uniform(0.5, 3.0))
        log("kill: kill -9 %d of %d" % (k + 1, KILLS))
        c.kill9()
        c.start()
    time.sleep(1)
    stop.set(); t.join(30)
    ids = [v["id"] for v in acked.values()]
    log("kill: %d acknowledged; waiting for them to end" % len(ids))
    jobs = c.settle(ids)
    r = {"acknowledged": len(ids), "kills": KILLS, "lost": 0, "duplicated": 0, "ran_twice": 0, "misread": 0,
         "failed_unstarted": 0, "unsettled": 0, "refused_503_429": refused[0], "details": []}
    # Duplicates: one key, two jobs (by name, over every job listed).
    code, page = c.call("GET", "/jobs?limit=100000", token=c.admin, timeout=120)
    names = {}
    for j in (page.get("jobs", []) if isinstance(page, dict) else []):
        names[j.get("name")] = names.get(j.get("name"), 0) + 1
    for key, v in acked.items():
        jid, j = v["id"], jobs.get(v["id"])
        if "dup" in v or names.get(key, 0) > 1:
            r["duplicated"] += 1; r["details"].append("duplicated %s" % key)
        if j is None:
            r["lost"] += 1; r["details"].append("lost %s" % jid); continue
        if j["state"] not in ("completed", "failed", "canceled"):
            r["unsettled"] += 1; r["details"].append("unsettled %s %s" % (jid, j["state"])); continue
        marks = c.marks(jid)
        ends = [m for m in marks if m.startswith("end ")]
        starts = [m for m in marks if m == "start"]
        if len(ends) > 1 or (ends and len(starts) > len(ends) and v["code"] == 0):
            r["ran_twice"] += 1; r["details"].append("ran twice %s: %s" % (jid, marks))
        if ends:
            want = int(ends[-1].split()[1])
            got = j.get("exit_code")
            if (want == 0 and j["state"] != "completed") or (want != 0 and got != want):
                r["misread"] += 1
                r["details"].append("misread %s: ended %d, recorded %s exit %s (%s)" % (jid, want, j["state"], got, j.get("reason")))
        elif not starts and j["state"] == "failed":
            r["failed_unstarted"] += 1; r["details"].append("failed without starting %s (%s)" % (jid, j.get("reason")))
    c.stop()
    return r

# ---------------------------------------------------------------- stop
def family_stop(split):
    name = "stop-split" if split else "stop-up"
    c = Corral(name, ttl="3s", split=split)
    c.start()
    ids = []
    for i in range(8):
        st, j = c.call("POST", "/queue/submit", {"command": job_cmd(c, 25, 0), "gpu_count": 1})
        ids.append(j["id"])
    wait_running(c, ids)
    target = c.procs["server" if split else "up"]
    log("%s: SIGSTOP for 10 s (3 TTLs)" % name)
    os.kill(target.pid, signal.SIGSTOP); time.sleep(10); os.kill(target.pid, signal.SIGCONT)
    time.sleep(5)  # a tick or two of the server's own attention
    running = sum(1 for i in ids if c.job(i)[1]["state"] == "running")
    jobs = c.settle(ids, limit=90)
    done = sum(1 for j in jobs.values() if j and j["state"] == "completed")
    c.stop()
    return {"jobs": len(ids), "running_after_stall": running, "completed": done, "killed_by_stall": len(ids) - done}

def wait_running(c, ids, limit=60):
    end = time.time() + limit
    while time.time() < end:
        if all(c.job(i)[1]["state"] == "running" for i in ids):
            return
        time.sleep(0.2)
    raise SystemExit("%s: jobs did not all run in %ds" % (c.name, limit))

# ---------------------------------------------------------------- disk
def family_disk():
    if not ROOT:
        return {"skipped": "not root (a tmpfs mount is needed)"}
    mnt = os.path.join(OUT, "disk-mnt")
    os.makedirs(mnt, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", mnt], check=True)
    try:
        c = Corral("disk", ttl="3s", data=os.path.join(mnt, "data"))
        c.start()
        ids = []
        for i in range(8):
            st, j = c.call("POST", "/queue/submit", {"command": job_cmd(c, 25, 0), "gpu_count": 1})
            ids.append(j["id"])
        wait_running(c, ids)
        log("disk: filling the data dir's disk for 10 s")
        subprocess.run(["dd", "if=/dev/zero", "of=" + os.path.join(mnt, "fill"), "bs=1M"], capture_output=True)
        refused, accepted = 0, []
        end = time.time() + 10
        while time.time() < end:
            st, j = c.call("POST", "/queue/submit", {"command": "true", "gpu_count": 0}, timeout=15)
            if st == 503:
                refused += 1
            elif st in (200, 201):
                accepted.append(j["id"])
            time.sleep(0.5)
        os.remove(os.path.join(mnt, "fill"))
        log("disk: freed")
        time.sleep(5)
        st, j = c.call("POST", "/queue/submit", {"command": "true", "gpu_count": 0}, timeout=30)
        after = st in (200, 201)
        running = sum(1 for i in ids if c.job(i)[1]["state"] == "running")
        jobs = c.settle(ids + accepted + ([j["id"]] if after else []), limit=90)
        done = sum(1 for i in ids if jobs[i] and jobs[i]["state"] == "completed")
        lost = sum(1 for i in accepted if jobs.get(i) is None)
        c.stop()
        return {"jobs": len(ids), "running_after_full_disk": running, "completed": done, "killed_by_stall": len(ids) - done,
                "refused_while_full": refused, "acknowledged_while_full": len(accepted), "lost": lost,
                "submits_after_freeing": after}
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True)

# ---------------------------------------------------------------- read
def family_read():
    c = Corral("read", ttl="5s")
    log("read: filling the store with 60,000 ended jobs")
    subprocess.run([BIN, "bench", "fill", "--data-dir", c.data, "--finished", "60000"], check=True, capture_output=True)
    c.start()
    st, j = c.call("POST", "/queue/submit", {"command": job_cmd(c, 40, 0), "gpu_count": 1})
    running = j["id"]
    wait_running(c, [running])
    stop, lat = threading.Event(), []
    def submitter():
        while not stop.is_set():
            t0 = time.time()
            st, _ = c.call("POST", "/queue/submit", {"command": "true", "gpu_count": 0}, timeout=120)
            lat.append(time.time() - t0)
            time.sleep(0.05)
    t = threading.Thread(target=submitter, daemon=True); t.start()
    reads = []
    for q in ("/jobs?limit=1000", "/jobs?limit=10", "/jobs?limit=1000&state=completed", "/jobs?limit=1000"):
        t0 = time.time()
        c.call("GET", q, token=c.admin, timeout=300)
        reads.append(round(time.time() - t0, 3))
    stop.set(); t.join(130)
    code, j = c.job(running)
    alive = j["state"] == "running"
    c.call("DELETE", "/queue/" + running)
    c.stop()
    return {"read_seconds": reads, "submits": len(lat), "worst_submit_s": round(max(lat or [0]), 3),
            "running_job_survived": alive, "killed_by_stall": 0 if alive else 1}

# ---------------------------------------------------------------- conn
def family_conn():
    c = Corral("conn")
    c.start()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    held = []
    n = 1500
    log("conn: opening %d stalled connections" % n)
    for i in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", c.port), timeout=5)
        except OSError:
            break
        if i % 2 == 0:  # a body that never comes, no token
            s.sendall(b"POST /queue/submit HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
        held.append(s)
    t0 = time.time()
    try:
        st, j = c.call("POST", "/queue/submit", {"command": "true", "gpu_count": 0}, timeout=30)
    except Exception as e:
        st = str(e)
    served = round(time.time() - t0, 3)
    # The unauthenticated ones are answered (401) without waiting for
    # their bodies.
    answered = 0
    for s in held[::2]:
        s.settimeout(0.05)
        try:
            if s.recv(64).startswith(b"HTTP/1.1 401"):
                answered += 1
        except OSError:
            pass
    for s in held:
        s.close()
    c.stop()
    return {"stalled_connections": len(held), "client_status": st, "client_served_s": served,
            "unauthenticated_answered_401": answered, "unauthenticated_held": len(held[::2])}

# ---------------------------------------------------------------- big
def family_big():
    c = Corral("big")
    c.start()
    far = [
        ("POST", "/reservations", {"name": "x3", "gpus": 1, "start": "9999-12-31T23:00:00Z", "duration": "2h"}),
        ("POST", "/reservations", {"name": "x4", "gpus": 1, "start": "2030-01-01T00:00:00Z", "duration": "100000000h"}),
        ("POST", "/reservations", {"name": "x5", "gpus": 1, "start": "0001-01-01T00:00:00Z", "duration": "1h"}),
        ("POST", "/queue/submit", {"command": "true", "time_limit": 10 ** 15}),
        ("POST", "/queue/submit", {"command": "true", "estimated_duration": 10 ** 15}),
        ("POST", "/queue/submit", {"command": "true", "time_limit": -5}),
        ("POST", "/queue/submit", {"command": "true", "max_retries": 10 ** 12}),
        ("POST", "/queue/submit", {"command": "x" * (1 << 20)}),
        ("POST", "/queue/submit", {"command": "true", "env": {"BIG": "y" * (1 << 20)}}),
        ("POST", "/queue/submit", {"command": "true", "env": {"K%d" % i: "v" for i in range(100000)}}),
    ]
    refused, accepted = 0, []
    for m, p, b in far:
        st, j = c.call(m, p, b)
        if st in (400, 413, 422):
            refused += 1
        else:
            accepted.append("%s %s -> %s" % (m, p, st))
    # The server still writes: a plain submission goes through.
    st, j = c.call("POST", "/queue/submit", {"command": "true", "gpu_count": 0})
    writes = st in (200, 201)
    st2, _ = c.call("GET", "/reservations")
    base = c.rss_mb()
    # Jobs at the limits, then three full listings.
    big_ok = 0
    for i in range(400):
        st, j = c.call("POST", "/queue/submit", {"command": "sleep 1000 #" + "x" * (60 << 10), "gpu_count": 8,
                                                 "env": {"E%d" % k: "v" * 1000 for k in range(100)}})
        if st in (200, 201):
            big_ok += 1
        elif st not in (400, 413, 422, 429):
            break
    after_submit = c.rss_mb()
    for _ in range(3):
        c.call("GET", "/jobs?limit=100000", token=c.admin, timeout=300)
    peak = c.rss_mb()
    c.stop()
    return {"impossible_inputs": len(far), "refused": refused, "accepted": accepted, "server_still_writes": writes,
            "get_reservations": st2, "big_jobs_accepted": big_ok, "rss_mb_base": round(base),
            "rss_mb_after_submits": round(after_submit), "rss_mb_after_listings": round(peak)}

USER = account()
log("jobs run as %s" % (USER or "the agent's account (--run-as agent)"))
bad = False
for f in FAMILIES:
    log("family", f)
    if f == "kill":
        r = results["kill"] = family_kill()
        bad |= any(r[k] for k in ("lost", "duplicated", "ran_twice", "misread", "failed_unstarted", "unsettled"))
    elif f == "stop":
        for split in (False, True):
            r = results["stop-split" if split else "stop-up"] = family_stop(split)
            bad |= r["killed_by_stall"] > 0
    elif f == "disk":
        r = results["disk"] = family_disk()
        bad |= bool(r.get("killed_by_stall") or r.get("lost") or r.get("submits_after_freeing") is False)
    elif f == "read":
        r = results["read"] = family_read()
        bad |= r["killed_by_stall"] > 0
    elif f == "conn":
        r = results["conn"] = family_conn()
        bad |= r["client_status"] not in (200, 201)
    elif f == "big":
        r = results["big"] = family_big()
        bad |= bool(r["accepted"]) or not r["server_still_writes"] or r["get_reservations"] != 200
    else:
        raise SystemExit("unknown family %r" % f)
    log(f, json.dumps({k: v for k, v in r.items() if k != "details"}))
    for d in r.get("details", [])[:20]:
        log("  ", d)
json.dump(results, open(os.path.join(OUT, "chaos.json"), "w"), indent=1)
print("| family | figures |\n|---|---|")
for f, r in results.items():
    print("| %s | %s |" % (f, ", ".join("%s %s" % (k, v) for k, v in r.items() if k != "details")))
print("chaos:", "FAIL" if bad else "PASS")
sys.exit(1 if bad else 0)
PY
