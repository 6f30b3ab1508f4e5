"""End to end: a platform connection that goes deaf is noticed, rebuilt and caught up, and a person is told."""
