"""The harness: runs one case variant inside a pinned TVM and reports what happened.

This is the only code that imports TVM, and it imports nothing of tvm-repro's
service, worker or client: it may use the standard library, TVM and numpy only,
because it runs inside the environment's own interpreter (a local virtual
environment under bubblewrap, or an image). It talks to the outside through
the case JSON it reads and the events it writes (see events.py).
"""
