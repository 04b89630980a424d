//! baselines
