"""The HTTP side: create_app(), the /api/v1 routes, the job store and the compare matrix."""
