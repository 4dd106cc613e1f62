"""Virtual clusters (a Django app): clusters, agent keys and configuration (``models``,
``services``, ``selectors``, ``api``), and beside them the cluster's SASL users and ACLs
(``security``), consumer groups (``groups``) and background job runs (``jobs``)."""
