"""The tvmrepro command line: an HTTP client of the service, plus --local runs."""
