"""Topics as Iceberg tables: the cluster's Iceberg REST catalog (``catalog``, served
under ``/iceberg/<cluster id>/``) and the topic tables its jobs keep appended to
(``topic_tables``, the ``table_append`` job run's plan and result)."""
