"""The core's tests use the service tests' PostgreSQL database of this session."""

from tests.service.conftest import clean_postgres, postgres_url

__all__ = ["clean_postgres", "postgres_url"]
