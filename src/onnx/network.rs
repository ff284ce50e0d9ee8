//! The network and its head as ONNX operators: `MatMul` and `Add` per layer with the trained
//! weights, the activation (gelu in its exact erf form), and what `ember predict` reports:
//! class probabilities and the class name, a binary classifier's probability and label, or
//! regression values in the target's units. Dropout is absent (inference).

use super::graph::{Attr, Graph, ML};
use super::inputs::{Dim, Inputs, value_info};
use super::proto::{ValueInfoProto, elem};
use super::{ConvLayer, Layer, Lookup, MlpNet, Network};
use crate::config::{Activation, Pooling, Task};
use crate::model::embed::Part;

/// Wires `net` after `inputs`; returns the graph's outputs.
pub fn build(
    g: &mut Graph,
    net: &Network,
    inputs: &Inputs,
    target: Option<(f64, f64)>,
) -> Vec<ValueInfoProto> {
    match net {
        Network::Mlp(m) => mlp_and_head(g, m, &inputs.features, target),
        Network::Cnn {
            image,
            blocks,
            pooling,
            mlp,
        } => {
            let maps = images(g, &inputs.features, *image);
            let features = convolutions(g, &maps, blocks, *pooling, mlp.activation);
            mlp_and_head(g, mlp, &features, target)
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

fn mlp_and_head(
    g: &mut Graph,
    m: &MlpNet,
    x: &str,
    target: Option<(f64, f64)>,
) -> Vec<ValueInfoProto> {
    let x = match &m.lookup {
        Some(l) => lookup(g, l, x),
        None => x.to_string(),
    };
    let out = mlp(g, &m.layers, m.activation, &x);
    head(g, &out, m.task, &m.names, target)
}

/// The first layer's inputs: the features as they are, with each embedded column's index
/// replaced by its row of the column's table (`model::embed::lookup`).
fn lookup(g: &mut Graph, l: &Lookup, x: &str) -> String {
    let columns = || Attr::Int("axis", 1);
    let parts: Vec<String> = (l.plan.parts.iter())
        .map(|part| match part {
            Part::Inputs(r) => {
                let at: Vec<i64> = (r.start as i64..r.end as i64).collect();
                let at = g.int64s("inputs", &[at.len()], &at);
                g.op("Gather", &[x, &at], vec![columns()])
            }
            Part::Lookup { input, table } => {
                let (rows, width, values) = &l.tables[*table];
                let at = g.int64s("index_input", &[], &[*input as i64]);
                let index = g.op("Gather", &[x, &at], vec![columns()]);
                let index = g.cast(&index, elem::INT64);
                let table = g.floats("embedding", &[*rows, *width], values);
                g.op("Gather", &[&table, &index], vec![Attr::Int("axis", 0)])
            }
        })
        .collect();
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    g.op("Concat", &refs, vec![columns()])
}

/// The flat rows `x` (pixels row by row, channels interleaved) as `[n, channels, height,
/// width]` maps.
fn images(g: &mut Graph, x: &str, [c, h, w]: [usize; 3]) -> String {
    let dims = |d: &[usize]| {
        std::iter::once(-1)
            .chain(d.iter().map(|&v| v as i64))
            .collect::<Vec<_>>()
    };
    if c == 1 {
        let shape = g.int64s("shape", &[4], &dims(&[1, h, w]));
        return g.bin("Reshape", x, &shape);
    }
    let shape = g.int64s("shape", &[4], &dims(&[h, w, c]));
    let hwc = g.bin("Reshape", x, &shape);
    g.op(
        "Transpose",
        &[&hwc],
        vec![Attr::Ints("perm", vec![0, 3, 1, 2])],
    )
}

/// The blocks (conv, batch norm, activation, max-pool), then the pooling into rows.
fn convolutions(
    g: &mut Graph,
    maps: &str,
    blocks: &[ConvLayer],
    pooling: Pooling,
    activation: Activation,
) -> String {
    let mut x = maps.to_string();
    for b in blocks {
        let k = b.kernel as i64;
        let w = g.floats(
            "conv_weight",
            &[b.outputs, b.inputs, b.kernel, b.kernel],
            &b.weight,
        );
        let bias = g.floats("conv_bias", &[b.outputs], &b.bias);
        let (s, p) = (b.stride as i64, b.padding as i64);
        let attrs = vec![
            Attr::Ints("kernel_shape", vec![k, k]),
            Attr::Ints("strides", vec![s, s]),
            Attr::Ints("pads", vec![p, p, p, p]),
        ];
        x = g.op("Conv", &[&x, &w, &bias], attrs);
        if let Some(n) = &b.norm {
            let c = [b.outputs];
            let parts = [&n.scale, &n.shift, &n.mean, &n.var].map(|v| g.floats("norm", &c, v));
            let inputs = [x.as_str(), &parts[0], &parts[1], &parts[2], &parts[3]];
            let epsilon = vec![Attr::Float("epsilon", n.epsilon as f32)];
            x = g.op("BatchNormalization", &inputs, epsilon);
        }
        x = activate(g, &x, activation);
        if b.pool > 1 {
            let p = b.pool as i64;
            let attrs = vec![
                Attr::Ints("kernel_shape", vec![p, p]),
                Attr::Ints("strides", vec![p, p]),
            ];
            x = g.op("MaxPool", &[&x], attrs);
        }
    }
    if pooling == Pooling::Average {
        x = g.op("GlobalAveragePool", &[&x], vec![]);
    }
    g.op("Flatten", &[&x], vec![Attr::Int("axis", 1)])
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
