//! In-memory types that read, write and describe themselves through an on-disk form
//! (`trace::wire::Record`, `graph::wire::Node`): the file format and its schema stay the
//! on-disk type's while the in-memory layout is free to be smaller.

/// Implements `Serialize`, `Deserialize` and `JsonSchema` for `$in_memory` through
/// `$wire`, given `From<&$in_memory> for $wire` and `From<$wire> for $in_memory`. The
/// schema is the on-disk form's, under the same name.
macro_rules! through_wire_form {
    ($in_memory:ty => $wire:ty) => {
        impl serde::Serialize for $in_memory {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(&<$wire>::from(self), serializer)
            }
        }

        impl<'de> serde::Deserialize<'de> for $in_memory {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <$wire as serde::Deserialize>::deserialize(deserializer).map(<$in_memory>::from)
            }
        }

        impl schemars::JsonSchema for $in_memory {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                <$wire as schemars::JsonSchema>::schema_name()
            }
            fn schema_id() -> std::borrow::Cow<'static, str> {
                <$wire as schemars::JsonSchema>::schema_id()
            }
            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                <$wire as schemars::JsonSchema>::json_schema(generator)
            }
        }
    };
}

pub(crate) use through_wire_form;
