"""The process: command line, settings, kopf's lifecycle, start, leader election."""
