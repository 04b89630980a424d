//! injectors
