"""Persistence only: the database, its schema and migrations, and a module per table family.

jobs (jobs and runs), results (results, logs, IR), comparisons, bisections, narrowings,
triages, known_issues, workers, blobs, retention (old jobs removed); base holds the engine and
write transactions they share, and artifacts the folder of values too large for a row.
The job store is `Store` (jobs.py, made of the other families); nothing outside this
package writes SQL.
"""

from tvmrepro.store.base import StoreAway, store_exists
from tvmrepro.store.comparisons import Compared
from tvmrepro.store.jobs import BudgetSpent, QueueFull, Store, open_store

__all__ = ["BudgetSpent", "Compared", "QueueFull", "Store", "StoreAway", "open_store",
           "store_exists"]
