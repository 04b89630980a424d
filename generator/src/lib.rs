//! generator
