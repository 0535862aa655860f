"""Records (foundations): a job's record and its hashes, locks, and disk checks."""
