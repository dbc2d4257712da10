"""Safety of the grader: model text never runs, every grade is bounded in time, the worker
pool survives kills, and hostile sizes/nesting are handled."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from reasoning_env.grading import Grader
from reasoning_env.grading.pool import get_pool

REPO = Path(__file__).resolve().parents[1]
GRADING_DIR = REPO / "reasoning_env" / "grading"
MARKER = "pwned_by_grader.txt"
MARGIN_S = 3.0  # process-kill latency and a loaded machine; speed targets live in the benchmark

# An integral: only math-verify evaluates it (the fast path evaluates sums and series itself, so
# they no longer force the worker path).
NEEDS_WORKER = (r"\boxed{\int_{0}^{1} 2x \, dx}", "1")
# Astronomically large values that cancel: nothing decides this fast, sympy hangs on it.
UNDECIDABLE = (r"\boxed{9^{9^{9^9}} - 9^{9^{9^9}}}", "0")


@pytest.fixture(scope="module")
def grader() -> Grader:
    g = Grader(timeout_s=2.0)
    assert g.warm_up(wait_s=90.0), "grading workers did not start"
    return g


# ----------------------------------------------------------------------------- no code execution
PAYLOADS = [
    rf"\boxed{{[open('{MARKER}','w').close()]}}",
    rf"\boxed{{open('{MARKER}','w').close()}}",
    rf"\boxed{{__import__('os').system('touch {MARKER}')}}",
    rf"\boxed{{__import__(\"os\").system(\"touch {MARKER}\")}}",
    rf"\boxed{{eval(\"open('{MARKER}','w')\")}}",
    rf"\boxed{{exec(\"open('{MARKER}','w').close()\")}}",
    rf"\boxed{{(lambda: open('{MARKER}','w'))()}}",
    r"\boxed{().__class__.__base__.__subclasses__()}",
    rf"The answer is: __import__('os').system('touch {MARKER}')",
    rf"#### __import__('os').system('touch {MARKER}')",
    rf"$\boxed{{\text{{{{__import__('os').system('touch {MARKER}')}}}}}}$",
]
GOLDS = [r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", "[1, 2]", "0", "x"]


def _marker_locations(pool) -> list:
    places = [Path.cwd(), REPO]
    for pid in pool.pids():
        try:
            places.append(Path(os.readlink(f"/proc/{pid}/cwd")))
        except OSError:
            pass
    return [p / MARKER for p in places]


@pytest.mark.parametrize("payload", PAYLOADS, ids=[f"payload{i}" for i in range(len(PAYLOADS))])
def test_payloads_never_execute(payload: str, grader: Grader, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for gold in GOLDS:
        result = grader.grade(payload, gold)
        assert result.correct is False
    time.sleep(0.05)
    created = [str(p) for p in _marker_locations(grader.pool) if p.exists()]
    assert not created, f"payload created {created}"


def test_payload_through_math_verify_directly(tmp_path, monkeypatch) -> None:
    """The worker's math-verify call (LaTeX extraction only) on a payload: no file."""
    import runpy
    import signal

    monkeypatch.chdir(tmp_path)
    # the worker script ignores Ctrl-C as it loads (its process's business): put this process's
    # handler back, or every later test's subprocess would inherit SIG_IGN for SIGINT
    previous = signal.getsignal(signal.SIGINT)
    try:
        worker = runpy.run_path(str(GRADING_DIR / "_worker.py"), run_name="worker_under_test")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert signal.getsignal(signal.SIGINT) is previous
    for payload in PAYLOADS:
        worker["mv_equal"](payload.replace(r"\boxed", ""), "1")
    assert not (tmp_path / MARKER).exists()


FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__"}  # bare calls (re.compile is fine)
FORBIDDEN_ANYWHERE = {"sympify", "parse_expr", "parse_latex", "S"}


def test_no_eval_exec_sympify_in_grading_code() -> None:
    """Static check: the grading package never calls eval/exec/sympify/parse_expr, and the
    worker only uses math-verify's LaTeX extraction config."""
    for path in sorted(GRADING_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = node.func
                if isinstance(fn, ast.Name):
                    assert fn.id not in FORBIDDEN_BUILTINS | FORBIDDEN_ANYWHERE, (
                        f"{path.name}:{node.lineno} calls {fn.id}"
                    )
                elif isinstance(fn, ast.Attribute):
                    assert fn.attr not in FORBIDDEN_ANYWHERE, f"{path.name}:{node.lineno} calls {fn.attr}"
            if isinstance(node, (ast.Name, ast.Attribute)):
                ident = node.id if isinstance(node, ast.Name) else node.attr
                assert ident != "ExprExtractionConfig", f"{path.name}:{node.lineno} uses ExprExtractionConfig"


# ----------------------------------------------------------------------------- bounded time
def _timed_grade(grader: Grader, pred: str, gold: str, timeout_s: float) -> tuple:
    t0 = time.monotonic()
    result = grader.grade(pred, gold, timeout_s=timeout_s)
    return result, time.monotonic() - t0


def test_power_tower_times_out_on_main_thread(grader: Grader) -> None:
    assert threading.current_thread() is threading.main_thread()
    result, elapsed = _timed_grade(grader, *UNDECIDABLE, timeout_s=1.0)
    assert elapsed <= 1.0 + MARGIN_S
    assert result.correct is False and result.reason == "timeout", result


def test_power_tower_times_out_off_the_main_thread(grader: Grader) -> None:
    out: dict = {}

    def work() -> None:
        out["r"] = _timed_grade(grader, *UNDECIDABLE, timeout_s=1.0)

    t = threading.Thread(target=work)
    t.start()
    t.join(1.0 + MARGIN_S + 5.0)
    assert not t.is_alive()
    result, elapsed = out["r"]
    assert elapsed <= 1.0 + MARGIN_S
    assert result.correct is False and result.reason == "timeout", result


def test_eight_threads_at_once_are_all_bounded(grader: Grader) -> None:
    results: list = []
    lock = threading.Lock()

    def work(i: int) -> None:
        pred, gold = UNDECIDABLE if i % 2 == 0 else (r"\boxed{9^{9^{9^9}}}", "9")
        r = _timed_grade(grader, pred, gold, timeout_s=1.5)
        with lock:
            results.append(r)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(1.5 + MARGIN_S + 10.0)
    assert len(results) == 8
    for result, elapsed in results:
        assert elapsed <= 1.5 + MARGIN_S, (result, elapsed)
        assert result.correct is False
        assert result.reason in ("timeout", "mismatch")


def test_monotone_power_tower_is_rejected_fast(grader: Grader) -> None:
    # 9^(9^(9^9)) only grows: it cannot equal 9, decided without any worker.
    result, elapsed = _timed_grade(grader, r"\boxed{9^{9^{9^9}}}", "9", timeout_s=2.0)
    assert result.correct is False and result.reason == "mismatch"
    assert elapsed < 1.0


@pytest.mark.parametrize(
    "pred",
    [r"\boxed{(10^{100})!}", r"\boxed{1000000!}", r"\boxed{10^{10^{10}}}", r"\boxed{\sin(10^{50})}"],
)
def test_huge_values_are_bounded(grader: Grader, pred: str) -> None:
    result, elapsed = _timed_grade(grader, pred, "5", timeout_s=2.0)
    assert result.correct is False
    assert elapsed <= 2.0 + MARGIN_S


@pytest.mark.parametrize(
    "pred,gold,expected",
    [
        (r"\boxed{1e999999999}", "1", False),
        (r"\boxed{1e99999}", "1", False),
        (r"\boxed{1e-999999999}", "1", False),
        (r"\boxed{7e" + "9" * 900 + "}", "7", False),
        (r"\boxed{1e5000}", "10^{5000}", True),
    ],
)
def test_huge_exponent_literals_get_a_fast_verdict(pred: str, gold: str, expected: bool, caplog) -> None:
    """Scientific notation is never expanded into a huge int (1e999999999 froze the process,
    holding the GIL) nor printed past Python's 4,300-digit limit (a logged traceback)."""
    fast = Grader(use_worker=False)
    with caplog.at_level("ERROR", logger="reasoning_env.grading"):
        result, elapsed = _timed_grade(fast, pred, gold, timeout_s=2.0)
    assert result.correct is expected and not result.detail.startswith("undecided"), result
    assert elapsed < 0.5, elapsed
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_huge_exponent_literal_off_the_main_thread_is_bounded() -> None:
    out: dict = {}

    def work() -> None:
        out["r"] = _timed_grade(Grader(use_worker=False), r"\boxed{1e999999999}", "1", timeout_s=1.0)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(1.0 + MARGIN_S)
    assert not t.is_alive(), "grade of 1e999999999 did not return"
    result, elapsed = out["r"]
    assert result.correct is False and result.reason == "mismatch" and elapsed <= 1.0, result


def test_one_megabyte_response(grader: Grader) -> None:
    text = ("Let x be 1. " * 90_000)[:1_000_000] + r" so \boxed{42}"
    result, elapsed = _timed_grade(grader, text, "42", timeout_s=2.0)
    assert result.correct is True and elapsed < 2.0


def test_one_megabyte_inside_the_box(grader: Grader) -> None:
    text = r"\boxed{" + "1+" * 500_000 + "1}"
    result, elapsed = _timed_grade(grader, text, "500001", timeout_s=2.0)
    assert result.correct is False and elapsed <= 2.0 + MARGIN_S


def test_hundred_thousand_nested_braces(grader: Grader) -> None:
    text = r"\boxed{" + "{" * 100_000 + "1" + "}" * 100_000 + "}"
    result, elapsed = _timed_grade(grader, text, "1", timeout_s=2.0)
    assert result.correct is False and elapsed <= 2.0 + MARGIN_S
    unclosed = r"\boxed{" + "{" * 100_000 + "1"
    result, elapsed = _timed_grade(grader, unclosed, "1", timeout_s=2.0)
    assert result.reason == "no_answer" and elapsed <= 2.0 + MARGIN_S


def test_moderately_nested_answer_is_bounded(grader: Grader) -> None:
    text = r"\boxed{" + r"\frac{1}{" * 300 + "2" + "}" * 300 + "}"
    result, elapsed = _timed_grade(grader, text, "1", timeout_s=2.0)
    assert result.correct is False and elapsed <= 2.0 + MARGIN_S


# ----------------------------------------------------------------------------- worker pool
@pytest.mark.parametrize(
    "pred",
    [r"\boxed{5 \text{ hours } 30 \text{ minutes}}", r"\boxed{5\text{ dollars and }3\text{ cents}}"],
)
def test_numbers_separated_by_words_never_reach_math_verify(grader: Grader, pred: str) -> None:
    """math-verify reads only the first number of "5 hours 30 minutes": a reward hack."""
    result = grader.grade(pred, "5", timeout_s=10.0)
    assert result.correct is False and result.reason == "mismatch", result
    assert result.detail.startswith("several numbers separated by words"), result


def test_worker_path_gives_a_symbolic_verdict(grader: Grader) -> None:
    result = grader.grade(*NEEDS_WORKER, timeout_s=10.0)
    assert result.correct is True and result.reason == "symbolic", result


def test_killed_worker_is_replaced_and_next_grade_works(grader: Grader) -> None:
    pool = grader.pool
    assert pool.warm_up(wait_s=60.0)
    before = pool.pids()
    assert before
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    result = grader.grade(*NEEDS_WORKER, timeout_s=20.0)
    assert result.correct is True and result.reason == "symbolic", result
    assert pool.warm_up(wait_s=60.0)
    after = pool.pids()
    assert len(after) == pool.size and not set(after) & set(before)


def test_timeout_replaces_the_worker(grader: Grader) -> None:
    pool = grader.pool
    assert pool.warm_up(wait_s=60.0)
    result = grader.grade(*UNDECIDABLE, timeout_s=0.5)
    assert result.reason == "timeout"
    assert pool.warm_up(wait_s=60.0) and len(pool.pids()) == pool.size
    assert grader.grade(*NEEDS_WORKER, timeout_s=20.0).correct is True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a worker's CPU time from /proc")
def test_a_cpu_time_limit_counts_the_workers_own_cpu_not_the_wait():
    """With ``cpu_time=True`` (the server's grades) the limit is the worker's CPU time on the
    request: a worker that gets no CPU for 3 s (frozen here, a busy machine in a server) still
    answers within a 1 s limit; the same wait on a wall-clock limit is a timeout."""
    from reasoning_env.grading.pool import WorkerPool

    def resume(pid: int) -> None:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:  # killed at its wall-clock deadline
            pass

    pool = WorkerPool(1)
    try:
        assert pool.warm_up(wait_s=60.0)
        results = {}
        for cpu_time in (True, False):
            pid = pool.pids()[0]
            os.kill(pid, signal.SIGSTOP)
            threading.Timer(3.0, resume, (pid,)).start()
            t0 = time.monotonic()
            results[cpu_time] = (pool.verify("1", "1", 1.0, cpu_time=cpu_time), time.monotonic() - t0)
            assert pool.warm_up(wait_s=60.0)
    finally:
        pool.shutdown()
    (status, verdict), took = results[True]
    assert status == "ok" and verdict is True and 2.5 < took < 30, results
    assert results[False][0][0] == "timeout", results


def test_a_grader_on_the_threads_cpu_clock_grades_as_on_the_wall_clock(grader: Grader) -> None:
    """The server's grader counts its limit on the grading thread's CPU time (``clock=time.thread_time``)
    and gives the worker what is left as CPU time: the verdicts are the same."""
    cpu = Grader(timeout_s=10.0, clock=time.thread_time)
    for response, gold in (NEEDS_WORKER, (r"\boxed{\frac{1}{2}}", "0.5"), (r"\boxed{7}", "8")):
        a, b = cpu.grade(response, gold), grader.grade(response, gold, timeout_s=10.0)
        assert (a.correct, a.reason) == (b.correct, b.reason), (a, b)


def test_workers_have_an_address_space_limit(grader: Grader) -> None:
    # earlier tests kill workers past their deadline; their replacements start in the background
    assert grader.pool.warm_up(wait_s=60.0), "grading workers did not restart"
    pid = grader.pool.pids()[0]
    limits = Path(f"/proc/{pid}/limits").read_text()
    line = next(ln for ln in limits.splitlines() if ln.startswith("Max address space"))
    assert "unlimited" not in line.split()[3], line


def test_pool_is_shared_process_wide() -> None:
    assert Grader().pool is get_pool() is Grader(timeout_s=1.0).pool


def test_workers_stop_when_the_process_exits(tmp_path) -> None:
    # Load only the grading subpackage (reasoning_env/__init__ pulls in openenv: seconds).
    script = (
        "import sys, types\n"
        f"pkg = types.ModuleType('reasoning_env'); pkg.__path__ = [{str(REPO / 'reasoning_env')!r}]\n"
        "sys.modules['reasoning_env'] = pkg\n"
        "from reasoning_env.grading import Grader\n"
        "g = Grader()\n"
        "assert g.warm_up(wait_s=90)\n"
        "print(' '.join(map(str, g.pool.pids())), flush=True)\n"
        "print(g.grade(r'\\boxed{\\int_{0}^{1} 2x \\, dx}', '1', timeout_s=20).reason, flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=str(REPO), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")
    pids = [int(x) for x in lines[0].split()]
    assert lines[1] == "symbolic"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.1)
    alive = [
        p for p in pids if Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text().split()[2]
    ]
    assert not alive, f"workers still running after exit: {alive}"


def test_bad_arguments_raise_clear_errors(grader: Grader) -> None:
    with pytest.raises(TypeError):
        grader.grade(None, "1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        grader.grade("x", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        grader.grade("x", "   ")
    with pytest.raises(ValueError):
        grader.grade("x", "1", timeout_s=0)
    with pytest.raises(ValueError):
        Grader(timeout_s=-1)


def test_sixty_redundant_braces_grade_fast() -> None:
    """A box holding 60 nested brace groups around 3 went past the parser's depth cap to
    math-verify and used the whole timeout; the braces are redundant and collapse."""
    g = Grader(timeout_s=2.0)
    t0 = time.perf_counter()
    r = g.grade(r"\boxed{" + "{" * 60 + "3" + "}" * 60 + "}", "3")
    assert r.correct and r.reason == "exact" and time.perf_counter() - t0 < 0.1, r


def test_a_grading_worker_whose_server_stopped_while_it_started_exits_quietly():
    """A server stopped during start-up closed its end of the pipe before the worker said "ready": the worker
    raised BrokenPipeError and printed a traceback per worker; it now exits with status 0."""
    import multiprocessing as mp
    import signal

    handler = signal.getsignal(signal.SIGINT)
    try:
        from reasoning_env.grading._worker import serve  # its import ignores SIGINT (a worker's setting)
    finally:
        signal.signal(signal.SIGINT, handler)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=serve, args=(child, 512 * 1024 * 1024))
    parent.close()
    proc.start()
    child.close()
    proc.join(60)
    assert proc.exitcode == 0
