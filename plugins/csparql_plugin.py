# The checkout's plugins folder: csparql's plugin when csparql is not installed with its airflow.plugins entry point.
from csparql.plugin import plugins_folder_classes; globals().update(plugins_folder_classes())  # noqa: E702
