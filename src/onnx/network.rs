//! The network and its head as ONNX operators: `MatMul` and `Add` per layer with the trained
//! weights, the activation (gelu in its exact erf form), and what `ember predict` reports:
//! class probabilities and the class name, a binary classifier's probability and label, or
//! regression values in the target's units. Dropout is absent (inference).

use super::graph::{Attr, Graph, ML};
use super::inputs::{Dim, Inputs, value_info};
use super::proto::{ValueInfoProto, elem};
use super::{Layer, Network};
use crate::config::{Activation, Task};

/// Wires `net` after `inputs`; returns the graph's outputs.
pub fn build(
    g: &mut Graph,
    net: &Network,
    inputs: &Inputs,
    target: Option<(f64, f64)>,
) -> Vec<ValueInfoProto> {
    match net {
        Network::Mlp {
            layers,
            activation,
            task,
            names,
        } => {
            let out = mlp(g, layers, *activation, &inputs.features);
            head(g, &out, *task, names, target)
        }
        Network::LinearScalar { weight, p } => {
            let w = g.floats("w", &[weight.len(), 1], weight);
            let p = g.floats("p", &[1, 1], &[*p]);
            let xw = g.bin("MatMul", &inputs.features, &w);
            let f = inputs
                .scalar
                .as_deref()
                .expect("linear-scalar has its scalar input");
            let fp = g.bin("Mul", f, &p);
            let out = g.bin("Add", &xw, &fp);
            vec![values(g, &out, 1, target)]
        }
    }
}

/// The layers: activation after each but the last.
fn mlp(g: &mut Graph, layers: &[Layer], activation: Activation, x: &str) -> String {
    let mut x = x.to_string();
    for (i, layer) in layers.iter().enumerate() {
        let w = g.floats("weight", &[layer.inputs, layer.outputs], &layer.weight);
        let b = g.floats("bias", &[layer.outputs], &layer.bias);
        let xw = g.bin("MatMul", &x, &w);
        x = g.bin("Add", &xw, &b);
        if i + 1 < layers.len() {
            x = activate(g, &x, activation);
        }
    }
    x
}

fn activate(g: &mut Graph, x: &str, activation: Activation) -> String {
    match activation {
        Activation::Relu => g.op("Relu", &[x], vec![]),
        Activation::Tanh => g.op("Tanh", &[x], vec![]),
        Activation::Sigmoid => g.op("Sigmoid", &[x], vec![]),
        Activation::Identity => x.to_string(),
        Activation::Gelu => {
            // x * (1 + erf(x / sqrt 2)) / 2, as Burn's gelu.
            let root2 = g.floats("sqrt2", &[], &[std::f32::consts::SQRT_2]);
            let (one, half) = (g.floats("one", &[], &[1.0]), g.floats("half", &[], &[0.5]));
            let scaled = g.bin("Div", x, &root2);
            let erf = g.op("Erf", &[&scaled], vec![]);
            let t = g.bin("Add", &erf, &one);
            let t = g.bin("Mul", x, &t);
            g.bin("Mul", &t, &half)
        }
    }
}

/// The task's outputs from the last layer's `out`.
fn head(
    g: &mut Graph,
    out: &str,
    task: Task,
    names: &[String],
    target: Option<(f64, f64)>,
) -> Vec<ValueInfoProto> {
    let k = names.len();
    match task {
        Task::Classification => {
            g.op("Softmax", &[out], vec![Attr::Int("axis", 1)]);
            let p = g.name_last("probabilities");
            let best = g.op(
                "ArgMax",
                &[&p],
                vec![Attr::Int("axis", 1), Attr::Int("keepdims", 0)],
            );
            class_names(g, &best, names, "class");
            let doc = format!("class probabilities, in the order {}", names.join(", "));
            vec![
                value_info(&p, elem::FLOAT, &[Dim::Batch, Dim::Fixed(k)], &doc),
                value_info(
                    "class",
                    elem::STRING,
                    &[Dim::Batch],
                    "the most probable class",
                ),
            ]
        }
        Task::Binary => {
            let p = g.op("Sigmoid", &[out], vec![]);
            let flat = g.int64s("flat", &[1], &[-1]);
            g.op("Reshape", &[&p, &flat], vec![]);
            let p = g.name_last("probability");
            let half = g.floats("half", &[], &[0.5]);
            let above = g.bin("Greater", &p, &half);
            // Where, not Cast: tract reads a Cast to int64 as a shape computation.
            let (one, zero) = (g.int64s("one", &[], &[1]), g.int64s("zero", &[], &[0]));
            let index = g.op("Where", &[&above, &one, &zero], vec![]);
            class_names(g, &index, names, "label");
            let doc = format!("probability of \"{}\"", names.get(1).map_or("1", |s| s));
            vec![
                value_info(&p, elem::FLOAT, &[Dim::Batch], &doc),
                value_info("label", elem::STRING, &[Dim::Batch], "the class, at 0.5"),
            ]
        }
        Task::Regression => vec![values(g, out, k, target)],
    }
}

/// `index` (int64) as the class name, the graph output `output`.
fn class_names(g: &mut Graph, index: &str, names: &[String], output: &str) {
    let attrs = vec![
        Attr::Ints("cats_int64s", (0..names.len() as i64).collect()),
        Attr::Strs("cats_strings", names.to_vec()),
        Attr::Str("default_string", ""),
    ];
    g.op_in(ML, "CategoryMapper", &[index], attrs);
    g.name_last(output);
}

/// A regression's `[n, k]` outputs as the output `values`, in the target's units when it was
/// trained standardised (in double precision, as `ember predict`).
fn values(g: &mut Graph, out: &str, k: usize, target: Option<(f64, f64)>) -> ValueInfoProto {
    if let Some((mean, std)) = target {
        let d = g.cast(out, elem::DOUBLE);
        let v = g.affine(&d, std, mean);
        g.cast(&v, elem::FLOAT);
    } else {
        g.op("Identity", &[out], vec![]);
    }
    g.name_last("values");
    value_info(
        "values",
        elem::FLOAT,
        &[Dim::Batch, Dim::Fixed(k)],
        "predicted values",
    )
}
