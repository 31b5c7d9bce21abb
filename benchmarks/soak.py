"""The soak: the embedded stack for hours, with streams landing live, idle gaps, killed components and vacuums.

``./bench.sh --soak`` (``--set soak_hours=2``, the default) runs ``csparql stack`` in a subprocess, as a user
runs it (its supervisor restarts whatever exits, and says so in its terminal, ``stack.log``), with the example
04 and two soak queries over a tollgate stream landed live by a feeder (``benchmarks.airflow_e2e.Feeder``: registrations
timestamped with the wall clock, landed every few seconds with ``ingest_stream`` in this process):

- ``SoakPerDistrict``: cars per district, ``[RANGE 5m STEP 1m] COMPUTED EVERY 1m`` (a ``REGISTER QUERY``);
- ``SoakDistrictStream``: the same counts as a ``REGISTER STREAM`` (its output is a stream of its own).

Both read the city as a named static graph (``FROM <…/soak/city>``), so that the example's sample graph in the
default graph never mixes with it. Every ``cycle_minutes`` (20) the run:

- stops landing for ``gap_minutes`` (longer than the Spark Connect server's idle timeout, which the soak sets to
  ``idle_timeout``): no window completes, no evaluation runs, every session the server holds expires;
- SIGKILLs one component, in turn the triggerer, the scheduler, the DAG processor, the api-server and the
  Connect server (the stack's supervisor starts it again, and says so);
- runs ``csparql vacuum`` on the warehouse (the shortest retention accepted without ``--force``), and once a
  ``--retain 0h --force`` while evaluations run, which must be refused or harmless.

Memory (resident set of the stack's processes, summed per component) is sampled every minute. At the end the
feeder stops, the windows due up to the last landed data are given ``drain_minutes`` to finish, and each due
window of each soak query is checked: evaluated exactly once (one succeeded run of revision 0; revisions are
counted apart), none failed for good, and its stored results equal pyoxigraph's answer over the same window's
triples and the same static graph (``benchmarks.workloads``: the engine's choice of files, the window's bounds
applied by DuckDB, the SPARQL 1.1 form of the query). ``report.md`` and ``results.json`` go to the run folder.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from benchmarks import data
from benchmarks.airflow_e2e import Feeder, _free_port

log = logging.getLogger("benchmarks.soak")
ROOT = Path(__file__).resolve().parents[1]
CITY_GRAPH = "http://example.org/soak/city"
PERIOD = "1m"
KILL_ORDER = ("triggerer", "scheduler", "dag-processor", "api-server", "spark-connect")

PREFIXES = "PREFIX c: <http://linkedurbandata.org/city#>\nPREFIX t: <http://linkedurbandata.org/traffic#>\n"
QUERIES = {
    "SoakPerDistrict": f"""REGISTER QUERY SoakPerDistrict COMPUTED EVERY {PERIOD} AS
{PREFIXES}SELECT DISTINCT ?district ?passages
FROM STREAM <{data.MILAN_TOLLGATES}> [RANGE 5m STEP {PERIOD}]
FROM <{CITY_GRAPH}>
WHERE {{ ?tollgate t:registers ?car .
        ?tollgate c:placedIn ?street .
        ?district c:contains ?street . }}
AGGREGATE {{ (?passages, COUNT, {{?district}}) }}
""",
    "SoakDistrictStream": f"""REGISTER STREAM SoakDistrictStream COMPUTED EVERY {PERIOD} AS
{PREFIXES}CONSTRUCT {{ ?district t:has-entering-cars ?passages }}
FROM STREAM <{data.MILAN_TOLLGATES}> [RANGE 5m STEP {PERIOD}]
FROM <{CITY_GRAPH}>
WHERE {{ ?tollgate t:registers ?car .
        ?district c:contains ?street .
        ?tollgate c:placedIn ?street . }}
AGGREGATE {{ ( ?passages, COUNT, {{?district}} ) }}
""",
}
REFERENCE_SPARQL = {
    "SoakPerDistrict": PREFIXES + """SELECT ?district (COUNT(*) AS ?passages)
WHERE { ?tollgate t:registers ?car . ?tollgate c:placedIn ?street . ?district c:contains ?street . }
GROUP BY ?district
""",
    "SoakDistrictStream": PREFIXES + """CONSTRUCT { ?district t:has-entering-cars ?passages }
WHERE { { SELECT ?district (COUNT(*) AS ?passages)
          WHERE { ?tollgate t:registers ?car . ?district c:contains ?street . ?tollgate c:placedIn ?street . }
          GROUP BY ?district } }
""",
}


@dataclass
class SoakPlan:
    """What one soak does (``--set soak_<field>=…`` overrides a field)."""

    hours: float = 2.0
    cycle_minutes: float = 20.0
    gap_minutes: float = 6.0
    idle_timeout: str = "4m"
    drain_minutes: float = 6.0
    rate: int = 20  # triples a second
    tick: float = 5.0  # seconds between two landings
    seed: int = 7
    sample_seconds: float = 60.0


@dataclass
class SoakEvents:
    kills: list[dict] = field(default_factory=list)
    vacuums: list[dict] = field(default_factory=list)
    gaps: list[dict] = field(default_factory=list)
    memory: list[dict] = field(default_factory=list)


class GappedFeeder(Feeder):
    """``Feeder`` that lands nothing while ``idle`` is set (and nothing for the time it was idle)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.idle = threading.Event()

    def _run(self) -> None:
        from csparql.ingest.ingest import ingest_stream

        index = 0
        while not self._stop.wait(self.tick):
            now = time.time_ns() // 1000
            if self.idle.is_set():
                self.last = now
                continue
            count = max(1, int(self.rate * (now - self.last) / 1e6))
            path = self.folder / f"feed-{index:06d}.nq"
            index += 1
            try:
                data._write_registrations(path, self.rng, self.city, self.last, now, count)
                report = ingest_stream(None, self.warehouse, data.MILAN_TOLLGATES, [path], in_process=True)
                self.ingests.append({"triples": report.landed, "watermark": report.max_ts, "at": now})
            except Exception as error:  # keep feeding: the report counts what failed
                self.errors.append(f"{time.strftime('%H:%M:%S')} {type(error).__name__}: {error}"[:500])
            path.unlink(missing_ok=True)
            self.last = now


def _tree_rss(pid: int | None) -> int:
    try:
        process = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)])
    except (psutil.Error, TypeError, ValueError):
        return 0


def component_pids(stack: subprocess.Popen, home: Path) -> dict[str, int]:
    """The main process of each component of the stack: the Airflow components (``components.json``, which
    the stack rewrites on each restart) and the Spark Connect server's JVM."""
    try:
        pids = json.loads((home / "components.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pids = {}
    try:
        for child in psutil.Process(stack.pid).children(recursive=True):
            if "SparkConnectServer" in " ".join(child.cmdline()) and child.name() == "java":
                pids["spark-connect"] = child.pid
    except psutil.Error:
        pass
    return pids


def _kill(stack: subprocess.Popen, home: Path, component: str) -> dict:
    """SIGKILL the component's main process (for the Connect server its JVM, as an out-of-memory kill would);
    the stack's supervisor finds it exited and starts it again."""
    pid = component_pids(stack, home).get(component)
    if pid:
        try:
            psutil.Process(pid).send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    return {"component": component, "pid": pid, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _csparql(*arguments: str, timeout: float = 600) -> subprocess.CompletedProcess:
    command = [str(Path(sys.executable).with_name("csparql")), *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _vacuum(warehouse: Path, *arguments: str) -> dict:
    clock = time.monotonic()
    done = _csparql("vacuum", "--warehouse", str(warehouse), *arguments)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return {"arguments": list(arguments), "exit": done.returncode, "seconds": round(time.monotonic() - clock, 1),
            "last_lines": lines[-3:], "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _load_city(warehouse: Path, work: Path, seed: int) -> None:
    """Load the soak's city graph with a local Spark of its own, before the stack starts."""
    static = work / "city.nt"
    static.write_text("".join(data.City.of(seed).static_lines()), encoding="utf-8")
    done = _csparql("load-static", str(static), "--graph", CITY_GRAPH, "--replace", "--warehouse", str(warehouse),
                    "--master", "local[1]")
    if done.returncode != 0:
        raise RuntimeError(f"loading the soak's city graph failed: {(done.stdout + done.stderr)[-2000:]}")


def _wait(predicate, timeout: float, what: str, interval: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the soak gave up waiting for {what} after {timeout:.0f} s")
        time.sleep(interval)


LOGIN = re.compile(r"Airflow is up: (http://127\.0\.0\.1:(\d+))\s+login: (\S+) / (\S+)")


def run_soak(out: Path, plan: SoakPlan) -> dict:
    """Run the soak (see the module docstring) in ``out``; its figures (also written as ``results.json`` and
    ``report.md`` there)."""
    from csparql.deploy.plan import deployment_of
    from csparql.deploy.registration import register_text
    from csparql.deploy.settings import Settings
    from csparql.stack.airflow_stack import AirflowStack
    from csparql.storage.warehouse import Warehouse

    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    if work.exists():
        shutil.rmtree(work)
    dags = work / "dags"
    dags.mkdir(parents=True)
    shutil.copy(ROOT / "dags" / "csparql_streams.py", dags / "csparql_streams.py")
    home = work / "airflow"
    settings = Settings(registry=dags / "queries", warehouse=Warehouse(work / "warehouse"), landing=work / "landing")
    environment = {**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "CSPARQL_REGISTRY": str(settings.registry),
                   "CSPARQL_WAREHOUSE": str(settings.warehouse.root), "CSPARQL_LANDING": str(settings.landing),
                   "CSPARQL_CONNECT_SESSION_TIMEOUT": plan.idle_timeout}
    events = SoakEvents()
    result: dict = {"plan": asdict(plan), "status": "failed"}
    feeder = GappedFeeder(settings.warehouse, work / "feed", plan.rate, plan.tick, plan.seed)
    started = time.time()
    terminal_path = out / "stack.log"
    stack = None
    try:
        _load_city(settings.warehouse.root, work, plan.seed)
        with open(terminal_path, "w", encoding="utf-8") as terminal:
            stack = subprocess.Popen(
                [str(Path(sys.executable).with_name("csparql")), "stack", "--port", str(_free_port()),
                 "--connect-port", str(_free_port()), "--home", str(home), "--windows", "1", "--examples", "04"],
                env=environment, cwd=work, stdout=terminal, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

        def said(text: str) -> bool:
            if stack.poll() is not None:
                raise RuntimeError(f"csparql stack exited with {stack.returncode}: see {terminal_path}")
            return text in terminal_path.read_text(encoding="utf-8", errors="replace")

        _wait(lambda: said("Airflow is up") and said("the Spark Connect server answers"), 900, "the stack")
        login = LOGIN.search(terminal_path.read_text(encoding="utf-8"))
        client = AirflowStack(home=home, dags=dags, settings_environment={}, port=int(login.group(2)),
                              username=login.group(3), password=login.group(4))
        feeder.start()
        names = list(QUERIES)
        for name, text in QUERIES.items():
            register_text(text, settings, name=name, replace=True, source_name=f"{name}.rq")
        dag_ids = [deployment_of(settings.registry / f"{name}.rq", settings).dag_id for name in names]
        client.wait_for_dags(dag_ids, timeout=600)
        for dag_id in dag_ids:
            client.unpause(dag_id)
        unpaused = time.time_ns() // 1000
        log.info("soak: %s unpaused; running for %.1f h", ", ".join(dag_ids), plan.hours)
        ends_at = time.monotonic() + plan.hours * 3600
        cycle = plan.cycle_minutes * 60
        next_sample = time.monotonic()
        forced_vacuum_done = False
        cycle_index = 0
        cycle_started = time.monotonic()
        while time.monotonic() < ends_at:
            if stack.poll() is not None:
                raise RuntimeError(f"csparql stack exited with {stack.returncode}: see {terminal_path}")
            now = time.monotonic()
            in_cycle = now - cycle_started
            gap_from = cycle * 0.4
            if gap_from <= in_cycle < gap_from + plan.gap_minutes * 60:
                if not feeder.idle.is_set():
                    feeder.idle.set()
                    events.gaps.append({"from": time.strftime("%H:%M:%S"), "minutes": plan.gap_minutes})
                    log.info("soak: landing paused for %.0f min", plan.gap_minutes)
            elif feeder.idle.is_set():
                feeder.idle.clear()
                log.info("soak: landing again")
            if in_cycle >= cycle:
                component = KILL_ORDER[cycle_index % len(KILL_ORDER)]
                events.kills.append(_kill(stack, home, component))
                log.info("soak: killed the %s", component)
                time.sleep(30)
                events.vacuums.append(_vacuum(settings.warehouse.root, "--retain", "1h"))
                if not forced_vacuum_done:
                    events.vacuums.append(_vacuum(settings.warehouse.root, "--retain", "0h", "--force"))
                    forced_vacuum_done = True
                log.info("soak: vacuums %s", [v["exit"] for v in events.vacuums[-2:]])
                cycle_index += 1
                cycle_started = time.monotonic()
            if now >= next_sample:
                pids = component_pids(stack, home)
                events.memory.append({"minute": round((time.time() - started) / 60, 1),
                                      **{name: _tree_rss(pid) // 2**20 for name, pid in pids.items()}})
                next_sample = now + plan.sample_seconds
            time.sleep(5)
        feeder.stop()
        log.info("soak: landing stopped; %.0f min for the due windows to finish", plan.drain_minutes)
        time.sleep(plan.drain_minutes * 60)
        result.update(check_windows(settings, names, unpaused, feeder))
        result["status"] = "ok" if result["every_window_once"] and result["answers_agree"] else "defects"
    except BaseException as error:  # noqa: BLE001 - the report says what stopped the soak
        result["error"] = f"{type(error).__name__}: {error}"[:3000]
        result["traceback"] = traceback.format_exc()[-6000:]
        log.exception("the soak stopped")
    finally:
        if feeder._thread.is_alive():
            feeder.stop()
        if stack is not None and stack.poll() is None:
            stack.send_signal(signal.SIGINT)  # what Ctrl-C does: the stack stops Airflow and Spark
            try:
                stack.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(stack.pid, signal.SIGKILL)
    result.update({
        "hours_run": round((time.time() - started) / 3600, 2),
        "kills": events.kills, "vacuums": events.vacuums, "gaps": events.gaps, "memory_mb": events.memory,
        "memory": memory_summary(events.memory),
        "feeder": {"ingests": len(feeder.ingests), "triples": sum(i["triples"] or 0 for i in feeder.ingests),
                   "errors": feeder.errors[:10], "error_count": len(feeder.errors)},
        "stack_restarts": _restarts(terminal_path),
    })
    (out / "results.json").write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    (out / "report.md").write_text(report(result), encoding="utf-8")
    return result


def _restarts(terminal: Path) -> list[str]:
    try:
        lines = terminal.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [line.strip() for line in lines if "started it again" in line or "answers again" in line]


def check_windows(settings, names: list[str], unpaused: int, feeder: Feeder) -> dict:
    """Each soak query's due windows: evaluated exactly once, none failed for good, equal to pyoxigraph."""
    from csparql.deploy.plan import deployment_of
    from csparql.core.frontend import compile_query
    from csparql.storage import delta
    from csparql.storage.instants import micros_of
    from csparql.storage.statistics import read_table
    from csparql.core.windows import parse_duration

    runs = read_table(settings.warehouse.runs).to_pylist() if delta.exists(settings.warehouse.runs) else []
    period = parse_duration(PERIOD)
    watermark = max((i["watermark"] or 0 for i in feeder.ingests), default=0)
    queries = {}
    for name in names:
        deployment = deployment_of(settings.registry / f"{name}.rq", settings)
        lateness = settings.allowed_lateness
        first = unpaused - unpaused % period
        last = watermark - (lateness or 0)
        last -= last % period
        due = list(range(first + period, last + 1, period))
        mine = [r for r in runs if r["query"] == name]
        by_end: dict[int, list[dict]] = {}
        for run in mine:
            by_end.setdefault(micros_of(run["window_end"]), []).append(run)
        missing, duplicated, failed_for_good, revised = [], [], [], 0
        for end in due:
            window_runs = by_end.get(end, [])
            first_evaluations = [r for r in window_runs if r["status"] == "succeeded" and not r.get("revision")]
            revised += len([r for r in window_runs if r["status"] == "succeeded" and r.get("revision")])
            if not first_evaluations:
                (failed_for_good if any(r["status"] == "failed" for r in window_runs) else missing).append(end)
            elif len(first_evaluations) > 1:
                duplicated.append(end)
        plan = compile_query(QUERIES[name], f"{name}.rq")
        disagreeing, compared = compare_with_pyoxigraph(settings, name, plan, due, deployment)
        queries[name] = {
            "due": len(due), "evaluated_once": len(due) - len(missing) - len(duplicated) - len(failed_for_good),
            "missing": [str(m) for m in missing[:20]], "duplicated": [str(d) for d in duplicated[:20]],
            "failed_for_good": [str(f) for f in failed_for_good[:20]], "revisions": revised,
            "failed_runs": len([r for r in mine if r["status"] == "failed"]),
            "failed_errors": sorted(Counter((r.get("error") or "")[:160] for r in mine
                                            if r["status"] == "failed").items())[:10],
            "compared": compared, "disagreeing": [str(d) for d in disagreeing[:20]],
        }
    return {"queries": queries,
            "every_window_once": all(not (q["missing"] or q["duplicated"] or q["failed_for_good"])
                                     for q in queries.values()),
            "answers_agree": all(not q["disagreeing"] for q in queries.values())}


def compare_with_pyoxigraph(settings, name: str, plan, ends: list[int], deployment) -> tuple[list[int], int]:
    """The window ends among ``ends`` whose stored results differ from pyoxigraph's answer; how many compared."""
    import duckdb
    import pyoxigraph as ox

    from benchmarks.systems import _ox_value
    from benchmarks.workloads import answer_of_rows, answer_of_triples, export_dataset, window_files

    stored = stored_answers(settings, name, deployment)
    connection = duckdb.connect()
    disagreeing = []
    folder = settings.warehouse.root.parent / "reference"
    folder.mkdir(exist_ok=True)
    for end in ends:
        window = window_files(plan, settings.warehouse, end)
        # a window of an idle gap reads no file: only the static graph (DuckDB reads no empty file list)
        window = dataclasses.replace(window, streams={i: w for i, w in window.streams.items() if w.files})
        path = folder / f"{name}-{end}.nt"
        export_dataset(connection, window, (), path)
        store = ox.Store()
        store.bulk_load(path=str(path), format=ox.RdfFormat.N_TRIPLES)
        result = store.query(REFERENCE_SPARQL[name])
        if deployment.output_stream:
            reference = answer_of_triples(
                (_ox_value(t.subject), _ox_value(t.predicate), _ox_value(t.object)) for t in result)
        else:
            names = [v.value for v in result.variables]
            reference = answer_of_rows([[_ox_value(s[n]) for n in names] for s in result])
        path.unlink()
        if stored.get(end, Counter()) != reference:
            disagreeing.append(end)
    return disagreeing, len(ends)


def stored_answers(settings, name: str, deployment) -> dict[int, Counter]:
    """The stored results of a soak query, per window end, as canonical multisets (triples for the stream)."""
    from benchmarks.workloads import answer_of_table, answer_of_triples
    from csparql.storage import delta
    from csparql.storage.instants import micros_of
    from csparql.storage.statistics import read_table

    if getattr(deployment, "output_stream", None):
        path = settings.warehouse.stream(deployment.output_stream)
        if not delta.exists(path):
            return {}
        table = read_table(path)
        answers: dict[int, Counter] = {}
        rows = table.to_pylist()
        by_end: dict[int, list] = {}
        for row in rows:
            by_end.setdefault(micros_of(row["ts"]), []).append(row)
        for end, group in by_end.items():
            answers[end] = answer_of_triples(
                (_term(r["s"]), _term(r["p"]), _term(r["o"])) for r in group)
        return answers
    path = settings.warehouse.results(name, "bindings")
    if not delta.exists(path):
        return {}
    table = read_table(path)
    answers = {}
    ends = [micros_of(v) for v in table.column("window_end").to_pylist()]
    for end in set(ends):
        mask = [e == end for e in ends]
        answers[end] = answer_of_table(table.filter(mask), ("district", "passages"))
    return answers


def _term(value):
    from rdflib import Literal, URIRef

    if isinstance(value, dict):
        if value.get("kind") == 1:
            return URIRef(value["value"])
        return Literal(value["value"], datatype=URIRef(value["datatype"]) if value.get("datatype") else None)
    return value


def memory_summary(samples: list[dict]) -> dict:
    """Per component, the median resident memory (MB) of the first and of the last half hour of samples."""
    if len(samples) < 4:
        return {}
    quarter = max(1, min(30, len(samples) // 4))
    summary = {}
    for component in sorted({k for s in samples for k in s if k != "minute"}):
        first = [s[component] for s in samples[:quarter] if s.get(component)]
        last = [s[component] for s in samples[-quarter:] if s.get(component)]
        if first and last:
            summary[component] = {"first_mb": statistics.median(first), "last_mb": statistics.median(last),
                                  "ratio": round(statistics.median(last) / statistics.median(first), 2)}
    return summary


def report(result: dict) -> str:
    """The soak's report as Markdown."""
    lines = ["# Soak of the embedded stack", "",
             f"Status: **{result['status']}**, {result.get('hours_run')} h run. Plan: `{json.dumps(result['plan'])}`.",
             ""]
    if result.get("error"):
        lines += [f"Stopped by: `{result['error']}`", ""]
    lines += ["| query | due windows | evaluated once | missing | duplicated | failed for good | revisions | "
              "failed runs | compared with pyoxigraph | differing |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, q in result.get("queries", {}).items():
        lines.append(f"| {name} | {q['due']} | {q['evaluated_once']} | {len(q['missing'])} | {len(q['duplicated'])} "
                     f"| {len(q['failed_for_good'])} | {q['revisions']} | {q['failed_runs']} | {q['compared']} "
                     f"| {len(q['disagreeing'])} |")
    lines += ["", "Failed runs' errors (each retried or evaluated again unless counted as failed for good above):",
              ""]
    for name, q in result.get("queries", {}).items():
        for error, count in q["failed_errors"]:
            lines.append(f"- {name}: {count} × `{error}`")
    lines += ["", "## Kills, vacuums, gaps", ""]
    lines += [f"- killed the {k['component']} at {k['at']}" for k in result["kills"]]
    lines += [f"- vacuum {' '.join(v['arguments'])} at {v['at']}: exit {v['exit']} in {v['seconds']} s — "
              f"{' / '.join(v['last_lines'])}" for v in result["vacuums"]]
    lines += [f"- landing paused {g['minutes']} min from {g['from']}" for g in result["gaps"]]
    lines += ["", "What the stack's terminal said of restarts:", ""]
    lines += [f"- {line}" for line in result["stack_restarts"]] or ["- (nothing)"]
    lines += ["", "## Memory (resident MB, median of the first and last samples)", "",
              "| component | first | last | last ÷ first |", "|---|---|---|---|"]
    for component, m in result["memory"].items():
        lines.append(f"| {component} | {m['first_mb']} | {m['last_mb']} | {m['ratio']} |")
    feeder = result["feeder"]
    lines += ["", f"Feeder: {feeder['ingests']} landings, {feeder['triples']} triples, {feeder['error_count']} "
                  "failed landings.", ""]
    return "\n".join(lines) + "\n"
