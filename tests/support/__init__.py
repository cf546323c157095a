"""Helpers shared by the test suites: real servers and strict fakes, no mocks of the wire."""
