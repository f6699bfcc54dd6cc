"""Keeping the buffer whole: recovery after a crash or a damaged segment (the readable episodes salvaged), the index
rebuilt from the segments alone, the index checked against the segments message by message, and the original bytes
of whatever was repaired kept in quarantine/."""
