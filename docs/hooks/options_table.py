"""A MkDocs hook: the ``[csparql]`` options table of the orchestration page, generated from the options themselves
(``csparql.deploy.settings.OPTIONS``) where the page has the marker ``<!-- csparql-options-table -->``."""

from __future__ import annotations

MARKER = "<!-- csparql-options-table -->"


def options_table() -> str:
    """The Markdown table of every ``[csparql]`` option: its key, variable, defaults and meaning."""
    from csparql.deploy.settings import OPTIONS

    def shown(value: str) -> str:
        return f"`{value}`" if value else "(none)"

    lines = ["| `[csparql]` option | variable (command line) | default in Airflow | default on the command line | "
             "meaning |", "|---|---|---|---|---|"]
    for option in OPTIONS:
        meaning = option.description.replace("|", "\\|")
        lines.append(f"| `{option.key}` | `{option.variable}` | {shown(option.airflow_default)} | "
                     f"{shown(option.cli_default)} | {meaning} |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return markdown.replace(MARKER, options_table()) if MARKER in markdown else markdown
