//! Self-describing records (placeholder until the wire work lands).
