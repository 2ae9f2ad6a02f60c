//! A tonic codec for messages known only by their descriptors: the
//! streaming methods (`super::streams`) are read from the project's
//! `.proto` files at run time, so requests decode into `DynamicMessage`s
//! and replies are `DynamicMessage`s too.

use prost::Message;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Decodes requests of one method's input type and encodes its output.
#[derive(Clone)]
pub struct DynamicCodec {
    input: MessageDescriptor,
}

impl DynamicCodec {
    /// A codec whose requests are `input` messages.
    pub fn new(input: MessageDescriptor) -> Self {
        Self { input }
    }
}

impl Codec for DynamicCodec {
    type Encode = DynamicMessage;
    type Decode = DynamicMessage;
    type Encoder = DynamicEncoder;
    type Decoder = DynamicDecoder;

    fn encoder(&mut self) -> DynamicEncoder {
        DynamicEncoder
    }

    fn decoder(&mut self) -> DynamicDecoder {
        DynamicDecoder(self.input.clone())
    }
}

/// Encodes any reply.
pub struct DynamicEncoder;

impl Encoder for DynamicEncoder {
    type Item = DynamicMessage;
    type Error = Status;

    fn encode(&mut self, item: DynamicMessage, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst).map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

/// Decodes messages of one type.
pub struct DynamicDecoder(MessageDescriptor);

impl Decoder for DynamicDecoder {
    type Item = DynamicMessage;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<DynamicMessage>, Status> {
        let msg = DynamicMessage::decode(self.0.clone(), src)
            .map_err(|e| Status::invalid_argument(format!("the request is not a valid {}: {e}", self.0.full_name())))?;
        Ok(Some(msg))
    }
}
