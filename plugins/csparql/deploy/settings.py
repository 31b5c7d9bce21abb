"""The deployment-wide settings: one table of options (``OPTIONS``), read in two places.

- Airflow's components (scheduler, DAG processor, triggerer, api-server, task runners) read the ``[csparql]``
  section of Airflow's configuration (``AIRFLOW__CSPARQL__<OPTION>`` or ``airflow.cfg``), which the provider
  info declares with these defaults and descriptions (``airflow config list --section csparql``): folder
  defaults live under ``AIRFLOW_HOME``. An option the section leaves at its default may still be given by its
  ``CSPARQL_*`` environment variable (the embedded stack and docker-compose set those).
- The command line reads the ``CSPARQL_*`` environment variables; its folder defaults live under the working
  directory.

No default depends on where the package is installed. This module imports no Airflow: the Airflow side hands
in its configuration object (``Settings.from_airflow``). Each option is documented in docs/orchestration.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from csparql.storage.vocabulary import DEFAULT_TIMESTAMP_PREDICATES
from csparql.storage.location import UnsupportedLocation, is_remote
from csparql.storage.warehouse import Warehouse, iri_problem, slug
from csparql.storage.watermarks import MAX_FUTURE_SKEW, check_future_skew
from csparql.core.windows import format_duration, parse_duration

SECTION = "csparql"
"""The section of Airflow's configuration that holds the options."""

GAP_POLICIES = ("warn", "fail")
"""``on_gap``: what consuming a message-bus source does with messages gone before they were read
(``csparql.ingest.sources``)."""

SPARK_MODES = ("local", "standalone", "connect")
"""Where evaluations run: Spark inside the Airflow task (local), a standalone cluster through spark-submit
(the Airflow connection ``spark_conn_id``, default ``spark_default``), or a Spark Connect server (the
connection ``spark_conn_id``, default ``spark_connect_default``)."""

MAX_FUTURE_SKEW_VARIABLE = "CSPARQL_MAX_FUTURE_SKEW"

AIRFLOW_HOME_DEFAULTS = "AIRFLOW_HOME"
WORKING_DIRECTORY_DEFAULTS = "the working directory"


@dataclass(frozen=True)
class SettingOption:
    """One option: its key in the ``[csparql]`` section, its environment variable for the command line, its
    default for Airflow's components and for the command line, its type and what it means."""

    key: str
    variable: str
    airflow_default: str
    cli_default: str
    type: str
    description: str

    @property
    def airflow_variable(self) -> str:
        """The variable Airflow's own configuration reads for this option."""
        return f"AIRFLOW__{SECTION.upper()}__{self.key.upper()}"


def _duration_default(micros: int) -> str:
    return format_duration(micros)


OPTIONS: tuple[SettingOption, ...] = (
    SettingOption("warehouse", "CSPARQL_WAREHOUSE", "{AIRFLOW_HOME}/csparql/warehouse", "delta_tables", "string",
                  "The warehouse: every stream, static graph, result and csparql's own tables (Delta). A local "
                  "folder, which every Airflow component and every Spark executor must see at this path, or "
                  "s3://bucket/prefix (endpoint and credentials: aws_conn_id, else the standard AWS variables)."),
    SettingOption("aws_conn_id", "CSPARQL_AWS_CONN_ID", "", "", "string",
                  "The Airflow connection (type aws: login = access key id, password = secret access key, extra "
                  "endpoint_url and region_name) that gives Airflow components the endpoint and credentials of a "
                  "warehouse in S3; empty: the standard AWS variables of each component."),
    SettingOption("registry", "CSPARQL_REGISTRY", "{AIRFLOW_HOME}/csparql/queries", "dags/queries", "string",
                  "The registry folder: one .rq file per registered query (the C-SPARQL pages and "
                  "`csparql register` write it; the DAG factory reads it)."),
    SettingOption("landing", "CSPARQL_LANDING", "", "", "string",
                  "Where files are dropped to be ingested, one folder per stream; empty: <warehouse>/landing "
                  "(with a warehouse in S3, a local landing folder in the working directory or AIRFLOW_HOME)."),
    SettingOption("spark", "CSPARQL_SPARK", "local", "local", "string",
                  "Where evaluations and ingests run: local (a Spark inside each task), standalone "
                  "(spark-submit through the `spark` connection) or connect (a Spark Connect server through "
                  "the `spark_connect` connection)."),
    SettingOption("spark_conn_id", "CSPARQL_SPARK_CONN_ID", "", "", "string",
                  "The Airflow connection that names the Spark to use (connection type `spark` for standalone, "
                  "`spark_connect` for connect); empty: spark_default or spark_connect_default."),
    SettingOption("pool", "CSPARQL_POOL", "csparql_spark", "csparql_spark", "string",
                  "The Airflow pool that caps concurrent window evaluations."),
    SettingOption("ingest_pool", "CSPARQL_INGEST_POOL", "csparql_ingest", "csparql_ingest", "string",
                  "The Airflow pool of the ingestion tasks, apart from the evaluations' so that a landed file "
                  "never waits behind a backlog of evaluations (ingests also go first: priority 1000)."),
    SettingOption("allowed_lateness", "CSPARQL_ALLOWED_LATENESS", "1m", "1m", "string",
                  "How far behind the wall clock a stream's watermark may be for a window to count as complete "
                  "(a C-SPARQL duration)."),
    SettingOption("wait_timeout", "CSPARQL_WAIT_TIMEOUT", "10m", "10m", "string",
                  "How long a run waits on the triggerer for its window's inputs before it evaluates anyway "
                  "(recorded as incomplete)."),
    SettingOption("poll_interval", "CSPARQL_POLL_INTERVAL", "2s", "2s", "string",
                  "How often the wait reads the watermarks at the latest (at least 1s; a read costs milliseconds); on a "
                  "local warehouse a commit to the watermarks or the runs table wakes it at once."),
    SettingOption("triggerer_evaluations", "CSPARQL_TRIGGERER_EVALUATIONS", "2", "2", "integer",
                  "With Spark Connect, how many windows one triggerer process evaluates at a time (at least 1); "
                  "complete windows beyond it wait for a place."),
    SettingOption("triggerer_windows_per_job", "CSPARQL_TRIGGERER_WINDOWS_PER_JOB", "1", "1", "integer",
                  "With Spark Connect, how many windows due together one Spark job of the triggerer may evaluate "
                  "(at least 1): above 1, their plans without ORDER BY run as one job, each window still its own "
                  "result commit; on two cores this saved no time (docs/performance/keeping-up.md)."),
    SettingOption("connect_session_timeout", "CSPARQL_CONNECT_SESSION_TIMEOUT", "10m", "10m", "string",
                  "How long the Spark Connect server of `csparql stack` keeps a session nobody uses (at least "
                  "1s); a client whose session it dropped opens a new one and evaluates again."),
    SettingOption("api_conn_id", "CSPARQL_API_CONN_ID", "", "", "string",
                  "The Airflow connection (type http: the api-server's URL, a login of role op or admin) through "
                  "which a REGISTER STREAM query evaluated on the triggerer records its output stream's Asset "
                  "event, so that its run takes no worker; empty: such a run finishes in a worker."),
    SettingOption("max_future_skew", MAX_FUTURE_SKEW_VARIABLE, _duration_default(MAX_FUTURE_SKEW),
                  _duration_default(MAX_FUTURE_SKEW), "string",
                  "Triples timestamped more than this ahead of the clock are rejected at ingest."),
    SettingOption("revision_horizon", "CSPARQL_REVISION_HORIZON", "1d", "1d", "string",
                  "A window made stale by late triples is re-evaluated when its end is at most this long "
                  "before they landed; older ones are only recorded stale."),
    SettingOption("push_max_bytes", "CSPARQL_PUSH_MAX_BYTES", "16777216", "16777216", "integer",
                  "The largest body, in bytes, that POST /csparql/api/streams/<stream> lands (larger: 413)."),
    SettingOption("sources", "CSPARQL_SOURCES", "", "", "string",
                  "Streams fed from a message bus: a JSON object from a stream's IRI to its source, "
                  "redis://CONN/KEY or kafka://CONN/TOPIC with ?format=MEDIA_TYPE&batch=N (CONN: an Airflow "
                  "connection, e.g. redis_default); the stream's ingestion DAG consumes it every minute."),
    SettingOption("on_gap", "CSPARQL_ON_GAP", "warn", "warn", "string",
                  "What consuming a message-bus source does when messages were gone before they were read (a "
                  "Redis stream trimmed past its position, Kafka offsets deleted by retention): warn (the run "
                  "logs the gap, its commit records it, and what remains lands) or fail (nothing lands and the "
                  "position stays, until the setting is warn)."),
    SettingOption("timestamp_predicates", "CSPARQL_TIMESTAMP_PREDICATES", "", "", "string",
                  "The predicates whose triple about a named graph gives its timestamp, per stream: a JSON object "
                  "from a stream's IRI to a list of IRIs, for its landing folder, pushes and message-bus source "
                  "(a stream not named: prov:generatedAtTime)."),
)
"""Every option of the ``[csparql]`` section, in the order ``airflow config list`` shows them."""

OPTION_BY_KEY = {option.key: option for option in OPTIONS}

OPTION_EXAMPLES = {
    "warehouse": "/data/csparql/warehouse",
    "registry": "/opt/airflow/dags/csparql/queries",
    "landing": "/data/csparql/landing",
    "spark": "connect",
    "spark_conn_id": "csparql_spark",
    "aws_conn_id": "aws_default",
    "api_conn_id": "csparql_airflow_api",
    "sources": '{"http://example.org/traffic": "redis://redis_default/traffic"}',
    "timestamp_predicates": '{"http://example.org/traffic": ["http://www.w3.org/ns/sosa/resultTime"]}',
}
"""An example value of the options whose default does not show what they take (``airflow config list
--include-examples``)."""


def airflow_config_section() -> dict:
    """The ``config`` entry of the provider info: the ``[csparql]`` section with each option's description,
    type and default, as Airflow's ``config.yml`` describes its own sections."""
    return {
        SECTION: {
            "description": "csparql: C-SPARQL continuous queries on Spark over Delta tables. Folder defaults "
                           "live under AIRFLOW_HOME; each option may also be set with AIRFLOW__CSPARQL__<OPTION>.",
            "options": {
                option.key: {
                    "description": option.description,
                    "version_added": "0.1.0",
                    "type": option.type,
                    "example": OPTION_EXAMPLES.get(option.key),
                    "default": option.airflow_default,
                }
                for option in OPTIONS
            },
        }
    }


def airflow_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$AIRFLOW_HOME``, else ``~/airflow``: where Airflow itself puts its home."""
    env = os.environ if environ is None else environ
    return Path(os.path.expanduser(env.get("AIRFLOW_HOME") or "~/airflow")).resolve()


@dataclass(frozen=True)
class Settings:
    """Deployment-wide settings (``OPTIONS``): from Airflow's ``[csparql]`` section inside Airflow
    (``from_airflow``), from ``CSPARQL_*`` variables on the command line (``from_environment``)."""

    registry: Path
    warehouse: Warehouse
    landing: Path
    spark: str = "local"
    spark_conn_id: str | None = None
    pool: str = "csparql_spark"
    ingest_pool: str = "csparql_ingest"
    allowed_lateness: int = 60_000_000
    wait_timeout: int = 600_000_000
    poll_interval: int = 2_000_000
    triggerer_evaluations: int = 2
    triggerer_windows_per_job: int = 1
    connect_session_timeout: int = 600_000_000
    api_conn_id: str | None = None
    aws_conn_id: str | None = None
    max_future_skew: int = MAX_FUTURE_SKEW
    revision_horizon: int = 86_400_000_000
    push_max_bytes: int = 16 << 20
    sources: tuple[tuple[str, str], ...] = ()
    on_gap: str = "warn"
    timestamp_predicates: tuple[tuple[str, tuple[str, ...]], ...] = ()
    retries: int = 2
    defaults: str = WORKING_DIRECTORY_DEFAULTS
    """Where the folder defaults live: ``AIRFLOW_HOME_DEFAULTS`` or ``WORKING_DIRECTORY_DEFAULTS``."""
    origins: tuple[tuple[str, str], ...] = ()
    """Per option key, what gave its value: a variable's name, ``airflow.cfg [csparql]`` or ``default``."""

    ENVIRONMENT = {option.key: option.variable for option in OPTIONS}

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, base: Path | None = None) -> Settings:
        """The command line's settings: each ``CSPARQL_*`` variable of ``environ`` (the process's by default),
        the defaults for the others, folders under ``base`` (the working directory by default); ``ValueError``
        naming the variable for a value that cannot be used."""
        env = os.environ if environ is None else environ
        values = {}
        for option in OPTIONS:
            text = env.get(option.variable)
            values[option.key] = (text, option.variable) if text else (option.cli_default, "default")
        return cls._from_values(values, (base or Path.cwd()), WORKING_DIRECTORY_DEFAULTS)

    @classmethod
    def from_airflow(cls, conf, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings of an Airflow component: the ``[csparql]`` section of ``conf`` (Airflow's
        configuration, ``airflow.configuration.conf``: ``AIRFLOW__CSPARQL__*`` and ``airflow.cfg``); an option
        it leaves at its default (or does not know, when the provider's defaults are not loaded) comes from its
        ``CSPARQL_*`` variable if set, else the default under ``AIRFLOW_HOME``."""
        env = os.environ if environ is None else environ
        home = airflow_home(env)
        values = {}
        for option in OPTIONS:
            default = option.airflow_default.replace("{AIRFLOW_HOME}", str(home))
            try:
                text = conf.get(SECTION, option.key, fallback=None)
            except Exception:  # noqa: BLE001 - a configuration Airflow cannot read counts as not set
                text = None
            if text is not None and not _same_value(option, text, default):
                origin = option.airflow_variable if env.get(option.airflow_variable) else f"airflow.cfg [{SECTION}]"
                values[option.key] = (text, origin)
            elif env.get(option.variable):
                values[option.key] = (env[option.variable], option.variable)
            else:
                values[option.key] = (default, "default")
        return cls._from_values(values, home, AIRFLOW_HOME_DEFAULTS)

    @classmethod
    def _from_values(cls, values: dict[str, tuple[str, str]], base: Path, defaults: str) -> Settings:
        def where(key: str) -> str:
            text, origin = values[key]
            name = OPTION_BY_KEY[key].variable if origin == "default" else origin
            return f"{name}={text!r}"

        def folder(key: str) -> Path:
            return (base / os.path.expanduser(values[key][0])).resolve()

        text = values["warehouse"][0]
        try:
            warehouse = Warehouse(text if is_remote(text) else folder("warehouse"))
        except UnsupportedLocation as error:
            raise ValueError(f"{where('warehouse')}: {error}") from None
        # A warehouse in S3 keeps its landing folders on local disk: files are dropped there by local tools and
        # moved to done/ or rejected/ once landed, and an object store has no move.
        landing = folder("landing") if values["landing"][0] else (
            (base / "csparql" / "landing" if defaults == AIRFLOW_HOME_DEFAULTS else base / "landing")
            if warehouse.remote else warehouse.root / "landing")
        spark = values["spark"][0]
        if spark not in SPARK_MODES:
            raise ValueError(f"{where('spark')}: use one of {', '.join(SPARK_MODES)}")
        on_gap = values["on_gap"][0].strip()
        if on_gap not in GAP_POLICIES:
            raise ValueError(f"{where('on_gap')}: use {' or '.join(GAP_POLICIES)}")

        def duration(key: str) -> int:
            text = values[key][0]
            try:
                value = parse_duration(text)
            except ValueError as error:
                raise ValueError(f"{where(key)}: {error}") from None
            if value < 0:
                raise ValueError(f"{where(key)}: must not be negative")
            return value

        def count(key: str) -> int:
            text = values[key][0].strip()
            try:
                value = int(text)
            except ValueError:
                raise ValueError(f"{where(key)}: not a whole number") from None
            if value < 1:
                raise ValueError(f"{where(key)}: must be at least 1")
            return value

        def skew(key: str) -> int:
            try:
                return check_future_skew(duration(key))
            except ValueError as error:
                raise ValueError(f"{where(key)}: {error}") from None

        return cls(
            registry=folder("registry"),
            warehouse=warehouse,
            landing=landing,
            spark=spark,
            spark_conn_id=values["spark_conn_id"][0] or None,
            pool=values["pool"][0] or "csparql_spark",
            ingest_pool=values["ingest_pool"][0] or "csparql_ingest",
            allowed_lateness=duration("allowed_lateness"),
            wait_timeout=duration("wait_timeout"),
            poll_interval=max(duration("poll_interval"), 1_000_000),
            triggerer_evaluations=count("triggerer_evaluations"),
            triggerer_windows_per_job=count("triggerer_windows_per_job"),
            connect_session_timeout=max(duration("connect_session_timeout"), 1_000_000),
            api_conn_id=values["api_conn_id"][0].strip() or None,
            aws_conn_id=values["aws_conn_id"][0].strip() or None,
            max_future_skew=skew("max_future_skew"),
            revision_horizon=duration("revision_horizon"),
            push_max_bytes=count("push_max_bytes"),
            sources=stream_sources(values["sources"][0], where("sources")),
            on_gap=on_gap,
            timestamp_predicates=stream_timestamp_predicates(values["timestamp_predicates"][0],
                                                             where("timestamp_predicates")),
            defaults=defaults,
            origins=tuple((key, origin) for key, (_, origin) in values.items()),
        )

    def timestamp_predicates_of(self, stream: str) -> tuple[str, ...]:
        """The predicates that timestamp the named graphs landed in ``stream`` (``timestamp_predicates``)."""
        return dict(self.timestamp_predicates).get(stream, DEFAULT_TIMESTAMP_PREDICATES)

    def landing_folder(self, stream: str) -> Path:
        """Where files for a stream are dropped to be ingested by its ingestion DAG."""
        return self.landing / slug(stream)

    @property
    def connection_id(self) -> str | None:
        """The Airflow connection for the Spark mode (None for local Spark)."""
        if self.spark == "local":
            return None
        return self.spark_conn_id or ("spark_default" if self.spark == "standalone" else "spark_connect_default")

    @classmethod
    def from_option_values(cls, values: Mapping[str, str], origin: str = "given") -> Settings:
        """The settings whose options hold ``values`` (option key → its text, as ``option_values`` gives them),
        each option ``values`` lacks at its command-line default; ``ValueError`` naming the option for a value
        that cannot be used. ``origin`` says what gave the values."""
        given = {option.key: (values[option.key], origin) if values.get(option.key) else (option.cli_default,
                                                                                             "default")
                 for option in OPTIONS}
        return cls._from_values(given, Path.cwd(), WORKING_DIRECTORY_DEFAULTS)

    def option_values(self) -> dict[str, str]:
        """Each option's value as text, as the ``[csparql]`` section would hold it (empty: unset);
        ``from_option_values`` reads them back into equal settings."""
        return {
            "warehouse": str(self.warehouse.root), "aws_conn_id": self.aws_conn_id or "",
            "registry": str(self.registry), "landing": str(self.landing),
            "spark": self.spark, "spark_conn_id": self.spark_conn_id or "", "pool": self.pool,
            "ingest_pool": self.ingest_pool,
            "allowed_lateness": format_duration(self.allowed_lateness),
            "wait_timeout": format_duration(self.wait_timeout),
            "poll_interval": format_duration(self.poll_interval),
            "triggerer_evaluations": str(self.triggerer_evaluations),
            "triggerer_windows_per_job": str(self.triggerer_windows_per_job),
            "connect_session_timeout": format_duration(self.connect_session_timeout),
            "api_conn_id": self.api_conn_id or "",
            "max_future_skew": format_duration(self.max_future_skew),
            "revision_horizon": format_duration(self.revision_horizon),
            "push_max_bytes": str(self.push_max_bytes),
            "sources": json.dumps(dict(self.sources)) if self.sources else "",
            "on_gap": self.on_gap,
            "timestamp_predicates": json.dumps({k: list(v) for k, v in self.timestamp_predicates})
                                    if self.timestamp_predicates else "",
        }

    def describe(self) -> list[str]:
        """One line per option: its key, its value and what gave it; first, where the defaults live."""
        origins = dict(self.origins)
        values = self.option_values()
        lines = [f"defaults under {self.defaults}"]
        width = max(len(key) for key in values)
        for key, value in values.items():
            lines.append(f"{key:<{width}}  {value}  ({origins.get(key, 'default')})")
        return lines


def _by_stream(text: str, where: str, valid, expected: str) -> dict:
    """A per-stream option's JSON object (stream IRI → value), each value ``valid``; ``ValueError`` at ``where``
    saying what was ``expected`` otherwise. Empty text: no stream."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not JSON ({error.msg} at character {error.pos + 1})") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and valid(v) for k, v in value.items()):
        raise ValueError(f"{where}: give {expected}")
    return value


def stream_sources(text: str, where: str) -> tuple[tuple[str, str], ...]:
    """The ``sources`` option: (stream IRI, source) pairs in IRI order from its JSON object; ``ValueError``
    saying what is wrong at ``where`` (the sources themselves are read by ``csparql.ingest.sources``)."""
    value = _by_stream(text, where, lambda source: isinstance(source, str),
                       'a JSON object from stream IRIs to sources, e.g. {"http://ex.org/s": "redis://redis_default/s"}')
    return tuple(sorted(value.items()))


def stream_timestamp_predicates(text: str, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The ``timestamp_predicates`` option: (stream IRI, predicate IRIs) pairs in IRI order from its JSON
    object; ``ValueError`` saying what is wrong at ``where``."""
    def predicate_iris(items) -> bool:
        return isinstance(items, list) and bool(items) and all(
            isinstance(item, str) and iri_problem(item, "predicate") is None for item in items)

    value = _by_stream(text, where, predicate_iris,
                       "a JSON object from stream IRIs to non-empty lists of predicate IRIs, e.g. "
                       '{"http://ex.org/s": ["http://www.w3.org/ns/sosa/resultTime"]}')
    return tuple(sorted((stream, tuple(predicates)) for stream, predicates in value.items()))


def _same_value(option: SettingOption, text: str, default: str) -> bool:
    """Whether ``text`` is ``default`` (folders compared as the paths they name: Airflow expands
    ``{AIRFLOW_HOME}`` without resolving links)."""
    if text == default:
        return True
    if option.airflow_default.startswith("{AIRFLOW_HOME}") and text and default:
        return Path(os.path.expanduser(text)).resolve() == Path(default).resolve()
    return False


def duration_setting(variable: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    """The duration (µs) the environment variable ``variable`` gives, ``default`` when it is unset or empty;
    ``ValueError`` naming the variable for a value that is not a duration or is negative."""
    env = os.environ if environ is None else environ
    text = env.get(variable)
    if not text:
        return default
    try:
        value = parse_duration(text)
    except ValueError as error:
        raise ValueError(f"{variable}={text!r}: {error}") from None
    if value < 0:
        raise ValueError(f"{variable}={text!r}: must not be negative")
    return value


def max_future_skew_setting(environ: Mapping[str, str] | None = None) -> int:
    """``$CSPARQL_MAX_FUTURE_SKEW`` in µs, else ``MAX_FUTURE_SKEW``; ``ValueError`` naming the variable, also
    for a skew longer than 100 years (``csparql.storage.watermarks.check_future_skew``)."""
    skew = duration_setting(MAX_FUTURE_SKEW_VARIABLE, MAX_FUTURE_SKEW, environ)
    try:
        return check_future_skew(skew)
    except ValueError as error:
        text = (os.environ if environ is None else environ).get(MAX_FUTURE_SKEW_VARIABLE)
        raise ValueError(f"{MAX_FUTURE_SKEW_VARIABLE}={text!r}: {error}") from None
