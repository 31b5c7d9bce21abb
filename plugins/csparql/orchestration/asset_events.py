"""Asset events recorded through Airflow's REST API, for the runs that end on the triggerer.

Airflow records the events of a task's outlets only when a worker finishes the task; a trigger cannot add
them. A run evaluated on the triggerer that must record one (the output stream of a ``REGISTER STREAM`` query)
records it instead through the public REST API (``POST /api/v2/assets/events``) as the login of an Airflow
connection (``[csparql] api_conn_id``, type ``http``: the api-server's URL, a login whose role may write Asset
events: ``op`` or ``admin`` with the simple auth manager), so that it needs no worker. Such an event has no
source task instance in Airflow (the API records it as the login's); its ``extra`` names the run that wrote it
(``dag_id``, ``run_id``, ``task_id``, ``map_index``).

The connection's token (``POST /auth/token``) and the Assets' ids are kept per process and looked up again
when the api-server refuses them; so is one HTTP client per api-server (``httpx.Client`` may be shared between
threads): a client's creation loads the system's certificates, and its connections are kept open between
events.
"""

from __future__ import annotations

import threading
import time

import httpx

from airflow.exceptions import AirflowException

TIMEOUT_SECONDS = 10.0
"""How long one call to the api-server may take."""

SERVER_ERROR_PAUSES = (0.5, 1.0, 2.0, 4.0)
"""The pauses before calling again after a server error (HTTP 5xx): an api-server on SQLite answers 500 while
another component holds the database, and its transaction was rolled back, so calling again records one event."""

_TOKENS: dict[tuple[str, str], str] = {}
_ASSET_IDS: dict[tuple[str, str], int] = {}
_CLIENTS: dict[str, httpx.Client] = {}
_LOCK = threading.Lock()


class AssetEventNotRecorded(AirflowException):
    """The event could not be recorded through the API; the message says why (for the task's log)."""


def api_base_url(connection) -> str:
    """The api-server's root URL from an ``http`` connection: its host when it is a URL (``http://host:8080``),
    else ``schema://host:port`` (schema ``http`` when empty)."""
    host = (connection.host or "").strip().rstrip("/")
    if not host:
        raise AssetEventNotRecorded(f"the Airflow connection {connection.conn_id!r} has no host: give the "
                                    "api-server's URL, e.g. http://airflow-apiserver:8080")
    if "://" in host:
        return host
    scheme = connection.schema or "http"
    return f"{scheme}://{host}:{connection.port}" if connection.port else f"{scheme}://{host}"


class AssetEventsApi:
    """Records Asset events through the REST API of the Airflow that ``conn_id`` names."""

    def __init__(self, conn_id: str) -> None:
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            connection = BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            raise AssetEventNotRecorded(
                f"there is no Airflow connection {conn_id!r} ([csparql] api_conn_id): create it with `airflow "
                f"connections add {conn_id} --conn-type http --conn-host http://API-SERVER:8080 --conn-login LOGIN "
                "--conn-password PASSWORD`") from None
        self.conn_id = conn_id
        self.url = api_base_url(connection)
        self.login = connection.login or ""
        self.password = connection.password or ""

    def record(self, uri: str, extra: dict) -> dict:
        """Record an event of the Asset whose URI is ``uri`` with ``extra``; returns the event as the API
        answers it. ``AssetEventNotRecorded`` when the api-server cannot be reached, refuses the login, or
        knows no such Asset."""
        client = _client(self.url)
        try:
            asset_id = self._asset_id(client, uri)
            answer = self._call(client, "POST", "/api/v2/assets/events", json={"asset_id": asset_id, "extra": extra})
            if answer.status_code == 404:  # the Asset was deleted and registered again: another id
                with _LOCK:
                    _ASSET_IDS.pop((self.url, uri), None)
                answer = self._call(client, "POST", "/api/v2/assets/events",
                                    json={"asset_id": self._asset_id(client, uri), "extra": extra})
        except httpx.HTTPError as error:
            raise AssetEventNotRecorded(f"the api-server {self.url} did not answer: {error}") from None
        self._check(answer, f"recording an event of {uri}")
        return answer.json()

    def _asset_id(self, client: httpx.Client, uri: str) -> int:
        with _LOCK:
            known = _ASSET_IDS.get((self.url, uri))
        if known is not None:
            return known
        answer = self._call(client, "GET", "/api/v2/assets", params={"uri_pattern": uri, "limit": 100})
        self._check(answer, f"looking up the Asset {uri}")
        # uri_pattern matches a part of the URI: only the Asset with exactly this one is meant
        ids = [asset["id"] for asset in answer.json().get("assets", []) if asset.get("uri") == uri]
        if not ids:
            raise AssetEventNotRecorded(f"Airflow at {self.url} knows no Asset {uri} (its DAG not parsed yet?)")
        with _LOCK:
            _ASSET_IDS[(self.url, uri)] = ids[0]
        return ids[0]

    def _call(self, client: httpx.Client, method: str, path: str, **arguments) -> httpx.Response:
        """One API call, made again after each of ``SERVER_ERROR_PAUSES`` while the api-server answers a server
        error; the last answer."""
        for pause in (*SERVER_ERROR_PAUSES, None):
            answer = self._authorized_call(client, method, path, **arguments)
            if answer.status_code < 500 or pause is None:
                return answer
            time.sleep(pause)

    def _authorized_call(self, client: httpx.Client, method: str, path: str, **arguments) -> httpx.Response:
        """One API call with the login's token, fetching a new token once when the api-server refuses it."""
        for fresh in (False, True):
            token = self._token(client, fresh)
            answer = client.request(method, path, headers={"Authorization": f"Bearer {token}"}, **arguments)
            if answer.status_code != 401:
                return answer
        return answer

    def _token(self, client: httpx.Client, fresh: bool) -> str:
        key = (self.url, self.login)
        with _LOCK:
            token = None if fresh else _TOKENS.get(key)
        if token is None:
            answer = client.post("/auth/token", json={"username": self.login, "password": self.password})
            self._check(answer, f"logging in as {self.login!r} (connection {self.conn_id!r})")
            token = answer.json()["access_token"]
            with _LOCK:
                _TOKENS[key] = token
        return token

    def _check(self, answer: httpx.Response, doing: str) -> None:
        if answer.is_success:
            return
        detail = " ".join(answer.text.split())[:300]
        raise AssetEventNotRecorded(f"{doing} at {self.url}: HTTP {answer.status_code} {detail}")


def _client(url: str) -> httpx.Client:
    """The process's HTTP client of the api-server at ``url``, created on first use and kept open."""
    with _LOCK:
        client = _CLIENTS.get(url)
        if client is None:
            client = _CLIENTS[url] = httpx.Client(base_url=url, timeout=TIMEOUT_SECONDS, trust_env=False)
        return client
