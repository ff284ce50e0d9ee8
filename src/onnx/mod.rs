//! `ember export --format onnx`: a run's whole path from a row to an answer as one ONNX model
//! (opset 17, IR version 8, plus `ai.onnx.ml` 3 for `CategoryMapper`): the preprocessing of its
//! data source ([`inputs`]), the trained network and the head of its task ([`network`]).
//!
//! Opset 17 with IR 8 is what onnxruntime has run since 1.14 and tract reads; nothing ember
//! needs came later. The messages are written with `prost` from a hand-declared subset of
//! `onnx.proto` ([`proto`]). A model whose protobuf would pass 2 GiB is refused with one line
//! (ember's models are far smaller; external data files are not written).

mod calendar;
mod graph;
mod inputs;
mod network;
pub mod proto;

use crate::config::JobConfig;
use crate::error::{EmberError, Result};
pub use crate::model::network::{ConvLayer, Layer, Lookup, MlpNet, Network, Norm};
use prost::Message;
use proto::{GraphProto, ModelProto, OperatorSetIdProto, StringStringEntryProto};

/// The default domain's opset.
pub const OPSET: i64 = 17;
/// The IR version that goes with [`OPSET`].
pub const IR_VERSION: i64 = 8;
/// The `ai.onnx.ml` opset of ONNX 1.12, the release of opset 17.
pub const ML_OPSET: i64 = 3;
/// protobuf's limit on one message.
const PROTOBUF_LIMIT: usize = (1 << 31) - 1;

/// The ONNX model of `net` trained by the run of `config` (its resolved config).
pub fn model(config: &JobConfig, net: &Network) -> Result<ModelProto> {
    let mut g = graph::Graph::default();
    let inputs = inputs::build(&mut g, config)?;
    let target = config.table().and_then(|t| t.target_stats);
    let outputs = network::build(&mut g, net, &inputs, target);
    let graph = GraphProto {
        node: g.nodes,
        name: config.name().to_string(),
        initializer: g.initializers,
        doc_string: format!("ember job {}", config.name()),
        input: inputs.infos,
        output: outputs,
    };
    let opset = |domain: &str, version| OperatorSetIdProto {
        domain: domain.into(),
        version,
    };
    let meta = |key: &str, value: String| StringStringEntryProto {
        key: key.into(),
        value,
    };
    Ok(ModelProto {
        ir_version: IR_VERSION,
        producer_name: "ember".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        domain: "ember".into(),
        model_version: 1,
        doc_string: format!("{} ({:?})", config.name(), config.task).to_lowercase(),
        graph: Some(graph),
        opset_import: vec![opset("", OPSET), opset(graph::ML, ML_OPSET)],
        metadata_props: vec![
            meta("ember.job", config.name().into()),
            meta("ember.config_hash", config.hash()),
        ],
    })
}

/// The bytes of `config`'s model with `net`'s weights.
pub fn bytes(config: &JobConfig, net: &Network) -> Result<Vec<u8>> {
    let model = model(config, net)?;
    let len = model.encoded_len();
    if len > PROTOBUF_LIMIT {
        return Err(EmberError::Runtime(format!(
            "the ONNX model would be {:.2} GiB, over protobuf's 2 GiB limit for one file (ember does not write external data files)",
            len as f64 / (1u64 << 30) as f64
        )));
    }
    Ok(model.encode_to_vec())
}
