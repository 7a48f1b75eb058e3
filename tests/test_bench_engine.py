"""benchmarks/bench_engine.py's bookkeeping, without running a contender (no Flower, no Ray): the reason a
failed contender process gives (its last exception line and the raylet's cause, not the deprecation
warning its stderr starts with), the stderr tail kept in the json, the retry in a fresh process and how
the md names it, the CPU flags and an emulated AVX2 path in the md's machine lines."""
import argparse
import json
import sys

from repo_scripts import load_script

be = load_script("benchmarks/bench_engine.py")
machine = sys.modules["machine"]  # benchmarks/machine.py, imported by bench_engine

# What a Flower contender process wrote to stderr when Ray did not start (shortened from engine.json of
# 2026-11-24, with the raylet line that flower_sim.ray_log_tails now prints before the traceback).
RAY_FAILURE = "\n".join([
    "\x1b[93mWARNING \x1b[0m:   DEPRECATED FEATURE: flwr.simulation.start_simulation() is deprecated.",
    "\tInstead, use the `flwr run` CLI command to start a local simulation in your Flower app, as shown",
    "",
    "\x1b[92mINFO \x1b[0m:      Starting Flower simulation, config: num_rounds=4, no round_timeout",
    "ray.init failed after 37.2 s; Ray's logs:",
    "--- /tmp/rayb1/session_x/logs/raylet.err (24 lines; 1 key line(s), then the last 6)",
    "[2026-11-26 07:30:41,964 C 1409 1409] (raylet) node_manager.cc:3362:  An unexpected system state has "
    "occurred. Check failed: status.has_value() Timed out waiting for file /tmp/rayb1/session_x/"
    "metrics_agent_port_33db",
    "Traceback (most recent call last):",
    '  File "/work/main/.venv/lib/python3.11/site-packages/ray/_private/node.py", line 423, in __init__',
    "    raise Exception(",
    "Exception: The current node timed out during startup. This could happen because some of the raylet "
    "failed to startup or the GCS has become overloaded.",
    "",
])


def test_failure_reason_is_the_exception_and_the_raylet_cause_not_the_warning():
    reason = be.failure_reason(RAY_FAILURE)
    assert reason.startswith("Exception: The current node timed out during startup.")
    assert "[Timed out waiting for file /tmp/rayb1/session_x/metrics_agent_port_33db]" in reason
    assert "DEPRECATED" not in reason and "\x1b" not in reason


def test_failure_reason_without_exception_line_is_the_last_line():
    assert be.failure_reason("a\nlast words\n\n") == "last words"
    assert be.failure_reason("", "only stdout\n") == "only stdout"
    assert be.failure_reason("", "") == "(no output)"
    assert be.failure_reason("x\nRuntimeError: Simulation crashed.\n  cleanup line\n") == \
        "RuntimeError: Simulation crashed."


def test_tail_lines_keeps_the_last_nonempty_lines_without_colour():
    text = "\n".join(f"\x1b[92mline {i}\x1b[0m" if i % 2 else f"line {i}\n" for i in range(100))
    tail = be.tail_lines(text, 5)
    assert tail == [f"line {i}" for i in range(95, 100)]
    assert be.tail_lines(RAY_FAILURE)[-1].startswith("Exception: The current node")


def _attempts(outcomes):
    calls = iter(outcomes)

    def run():
        ok = next(calls)
        return {"contender": "flower", "model": "lenet", "median_s": 1.0} if ok else \
            {"contender": "flower", "model": "lenet", "error": "exit 1: Exception: boom", "stderr_tail": ["boom"],
             "load_before": [9.0, 8.0, 7.0], "process_s": 40.0}
    return run


def test_retry_once_after_a_failure_and_say_so():
    r = be.run_with_retries(_attempts([False, True]), retries=1)
    assert "error" not in r and r["attempts"] == 2 and r["retried"] is True
    assert r["failed_attempts"] == [{"error": "exit 1: Exception: boom", "stderr_tail": ["boom"],
                                     "load_before": [9.0, 8.0, 7.0], "process_s": 40.0}]


def test_no_retry_when_the_first_attempt_completes_or_retries_are_off():
    r = be.run_with_retries(_attempts([True]), retries=1)
    assert r["attempts"] == 1 and r["retried"] is False and r["failed_attempts"] == []
    r = be.run_with_retries(_attempts([False, True]), retries=0)
    assert r["error"] == "exit 1: Exception: boom" and r["attempts"] == 1 and r["failed_attempts"] == []


def test_a_failed_retry_is_the_result_with_both_attempts_recorded():
    r = be.run_with_retries(_attempts([False, False, True]), retries=1)
    assert r["error"] == "exit 1: Exception: boom" and r["attempts"] == 2 and r["retried"] is True
    assert len(r["failed_attempts"]) == 1


def test_attempt_notes_and_completion_line_name_retries_and_failures():
    ok = {"contender": "flower", "model": "lenet", "invocation": 0, "median_s": 1.0, "attempts": 1,
          "retried": False, "failed_attempts": []}
    retried = dict(ok, invocation=1, attempts=2, retried=True,
                   failed_attempts=[{"error": "exit 1: Exception: a | b", "stderr_tail": []}])
    failed = {"contender": "flower", "model": "lenet", "invocation": 2, "error": "exit 1: Exception: c",
              "stderr_tail": [], "attempts": 2, "retried": True, "failed_attempts": [{"error": "x"}]}
    notes = be.attempt_notes([failed, ok, retried])
    assert notes == ["invocation 2 retried in a fresh process after a failed attempt (exit 1: Exception: a / b)",
                     "invocation 3 FAILED (2 attempts): exit 1: Exception: c"]
    line = be.completion_line([ok, retried, failed])
    assert "2 of 3 contender runs completed" in line and "1 of them on a retry" in line and "1 failed" in line
    assert be.completion_line([ok]) == "**Completion: 1 of 1 contender runs completed**, none needed a retry."


def test_old_error_text_gives_its_reason():
    """Runs before this change stored stdout + stderr whole in "error"."""
    old = {"error": "exit 1: " + RAY_FAILURE}
    assert be.error_reason(old).startswith("exit 1: Exception: The current node timed out during startup.")


M = {"cpu_model": "AMD EPYC", "cpu_family_model": "family 26 model 2", "nproc": 2, "hypervisor": "KVM",
     "avx512": True, "ram_gib": 23.5, "cpu_flags": ["avx2", "fma", "avx512f", "avx512_bf16"]}


def test_cpu_line_names_the_flags():
    line = machine.cpu_line(M)
    assert "AMD EPYC" in line and "flags avx2 fma avx512f avx512_bf16" in line
    old = {k: v for k, v in M.items() if k != "cpu_flags"}  # a json written before flags were recorded
    assert "flags" not in machine.cpu_line(old)


def test_isa_line_says_when_avx2_is_emulated():
    assert machine.isa_line(M, dict(machine.AVX2_EMULATION_ENV), ["AVX2"]).startswith(
        "**AVX2 emulated on AMD EPYC** (an AVX-512 CPU): ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2")
    assert "torch CPU capability in the processes: AVX2" in machine.isa_line(M, dict(machine.AVX2_EMULATION_ENV),
                                                                              ["AVX2", "AVX2"])
    assert machine.isa_line(M, {}).startswith("ISA: the CPU's own")
    assert machine.isa_line(M, None).startswith("ISA: not recorded")
    no512 = dict(M, avx512=False)
    assert machine.isa_line(no512, dict(machine.AVX2_EMULATION_ENV)).startswith("ISA capped")


def test_emulate_avx2_option_sets_both_variables(monkeypatch):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert be.isa_env(argparse.Namespace(emulate_avx2=True)) == {"ONEDNN_MAX_CPU_ISA": "AVX2",
                                                                 "ATEN_CPU_CAPABILITY": "avx2"}
    assert be.isa_env(argparse.Namespace(emulate_avx2=False)) == {}
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")  # set by hand: passed on and named
    assert be.isa_env(argparse.Namespace(emulate_avx2=False)) == {"ATEN_CPU_CAPABILITY": "avx2"}


def test_markdown_names_cpu_flags_emulation_and_the_retry(tmp_path):
    spr = 10 * 500

    def run(contender, inv, **kw):
        r = {"contender": contender, "model": "lenet", "invocation": inv, "round_s": [0.5, 0.5],
             "own_cores": [1.0, 1.0], "foreign_cores": [0.0, 0.0], "warmup_s": [1.0], "startup_s": 20.0,
             "cpu_capability": "AVX2", "attempts": 1, "retried": False, "failed_attempts": [], **kw}
        return be.summarise(r, spr, 2)

    results = [run("plain", 0), run("flower", 0, attempts=2, retried=True, failed_attempts=[
        {"error": "exit 1: Exception: The current node timed out during startup. [Timed out waiting for file "
                  "/tmp/x/metrics_agent_port_1]", "stderr_tail": ["..."]}])]
    args = argparse.Namespace(models=["lenet"], contenders="plain,flower", invocations=1, rounds=2, warmup=1,
                              extra=0, clients=10, samples=500, batch=64, lr=1e-3, seed=0, threads=1, data="prestd",
                              malloc="tuned", retries=1, emulate_avx2=True)
    meta = {"machine": dict(M, gpu="none", python="3.11", torch="2", torch_parallel=["OpenMP"], kernel="6",
                            flwr="1.42.0", ray="2.55.1"),
            "command": "bench_engine.py --emulate-avx2", "finished": "now", "load_before": [1, 1, 1],
            "load_after": [1, 1, 1], "wall_s": 10.0, "isa_env": dict(machine.AVX2_EMULATION_ENV)}
    out = tmp_path / "engine.md"
    be.write_markdown(out, meta, results, args)
    md = out.read_text()
    assert "- CPU: AMD EPYC" in md and "flags avx2 fma avx512f avx512_bf16" in md
    assert "**AVX2 emulated on AMD EPYC**" in md and "torch CPU capability in the processes: AVX2" in md
    assert "**Completion: 2 of 2 contender runs completed**, 1 of them on a retry in a fresh process (lenet flower)" in md
    flower_row = next(ln for ln in md.splitlines() if ln.startswith("| Flower simulation"))
    assert "invocation 1 retried in a fresh process after a failed attempt (exit 1: Exception: The current node " \
           "timed out during startup. [Timed out waiting for file /tmp/x/metrics_agent_port_1])" in flower_row
    json.dumps(results)  # what main() writes to the json


def test_a_contender_past_its_timeout_is_an_error_not_a_crash():
    args = argparse.Namespace(rounds=1, warmup=0, extra=0, clients=10, samples=500, batch=64, lr=1e-3, seed=0,
                              threads=1, data="prestd", malloc="tuned", timeout=1, emulate_avx2=False)
    r = be.run_contender(args, "lenet", "plain")
    assert r["error"].startswith("killed after the 1 s timeout: ") and r["contender"] == "plain"
    assert isinstance(r["stderr_tail"], list) and r["process_s"] >= 1


def test_bf16_is_native_only_with_the_flag_and_no_isa_cap():
    assert be.bf16_native({"cpu_flags": ["avx2", "avx512_bf16"]}, {})
    assert be.bf16_native({"cpu_flags": ["amx_bf16"]}, None)
    assert not be.bf16_native({"cpu_flags": ["avx2", "avx512_bf16"]}, dict(machine.AVX2_EMULATION_ENV))
    assert not be.bf16_native({"cpu_flags": ["avx2", "fma"]}, {})


def test_load_line_says_quiet_only_when_other_processes_stayed_below_the_threshold():
    quiet = [{"foreign_cores_median": 0.01}, {"foreign_cores_median": 0.05}]
    assert be.load_line(quiet).startswith("**Quiet machine**: other processes kept at most 0.05 cores")
    shared = quiet + [{"foreign_cores_median": be.QUIET_CORES + 0.5}]
    assert be.load_line(shared).startswith("**The machine was shared**: other processes kept up to 0.60 cores")


def test_targets_are_issue_28s_and_bf16_targets_need_native_bf16(tmp_path):
    def run(contender, rate):
        r = {"contender": contender, "model": "privlabels_cnn", "invocation": 0, "round_s": [5000 / rate] * 2,
             "own_cores": [1.0, 1.0], "foreign_cores": [0.0, 0.0], "warmup_s": [1.0], "startup_s": 1.0,
             "cpu_capability": "AVX512", "attempts": 1, "retried": False, "failed_attempts": []}
        return be.summarise(r, 10 * 500, 2)

    results = [run("plain", 700), run("flower", 650), run("batched-grouped", 800), run("batched-grouped-bf16", 2100)]
    args = argparse.Namespace(models=["privlabels_cnn"], contenders=",".join(r["contender"] for r in results),
                              invocations=1, rounds=2, warmup=1, extra=0, clients=10, samples=500, batch=64, lr=1e-3,
                              seed=0, threads=1, data="prestd", malloc="tuned", retries=0, emulate_avx2=False)
    meta = {"machine": dict(M, gpu="none", python="3.11", torch="2", torch_parallel=["OpenMP"], kernel="6",
                            flwr="1.41.0", ray="2.55.1"),
            "command": "bench_engine.py", "finished": "now", "load_before": [0, 0, 0], "load_after": [1, 1, 1],
            "wall_s": 10.0, "isa_env": {}}
    out = tmp_path / "engine_x.md"
    be.write_markdown(out, meta, results, args)
    md = out.read_text()
    assert "[`engine_x.json`](engine_x.json)" in md and "**Quiet machine**" in md
    targets = [ln for ln in md.splitlines() if ln.startswith("Target ")]
    assert len(targets) == 3
    assert ">= 1.2x Flower" in targets[0] and "wall **1.23x**" in targets[0] and targets[0].endswith(
        "**met** (both medians must reach it).")
    assert ">= 1x plain PyTorch loop, fp32" in targets[1] and "**met**" in targets[1]
    assert ">= 3x Flower" in targets[2] and "wall **3.23x**" in targets[2]
    be.write_markdown(out, dict(meta, isa_env=dict(machine.AVX2_EMULATION_ENV)), results, args)
    bf16 = [ln for ln in out.read_text().splitlines() if ln.startswith("Target ") and "bf16" in ln.split(">=")[0]]
    assert len(bf16) == 1 and "not applicable, bf16 is not native" in bf16[0]
