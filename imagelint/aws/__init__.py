"""AWS flows: check an AMI on a throwaway instance or from its root snapshot, tag the verdict, fleet runs.

Only the ``ami`` and ``fleet`` commands import this package; boto3 is imported inside functions so
that ``imagelint audit`` never loads it.
"""
