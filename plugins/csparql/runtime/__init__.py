"""The Spark runtime the engine runs on, apart from what it compiles: the process's SparkSession and its settings
(``session.py``) and the launcher of a local Spark Connect server that the embedded stack supervises
(``connect_server.py``)."""
