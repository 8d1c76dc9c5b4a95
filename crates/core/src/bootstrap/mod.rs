//! Bootstrap through PMI.
