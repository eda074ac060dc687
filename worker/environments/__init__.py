"""A worker's environments: made (provisioned here, or built as images), fingerprinted, served.

provision.py makes a local environment from its pins; images.py builds and checks an
environment's Docker image; fingerprints.py records what each one's TVM has; building.py
builds the images a starting worker lacks and following.py serves the environments
provisioned on its home while it runs.
"""
