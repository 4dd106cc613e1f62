"""Planning and recording the background jobs: which cluster has work (``selectors``),
dispatching runs and swapping the metadata after a Spark job (``services``), the Celery
tasks beat calls (``tasks``). The Spark jobs themselves are the top-level ``jobs``."""
