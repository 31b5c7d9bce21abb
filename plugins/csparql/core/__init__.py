"""The pure core: the language, its algebra and optimizer, window arithmetic and the rules of panes, schedules
and late data. Nothing in it imports Spark, Airflow or Delta, so it can be read, tested and used on its own
(``csparql.compile_query`` compiles a query with it alone). This file imports nothing.
"""
