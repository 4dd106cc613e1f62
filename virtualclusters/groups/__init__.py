"""Consumer groups as the control plane sees them: what coordinator agents report,
listing, deletion (``services``), lag (``lag``) and their agent-API calls."""
