//! A small builder for an ONNX graph: constants as initializers, nodes with one output each, and
//! fresh value names, so that the code building ember's graphs reads as the arithmetic it does.

use super::proto::{AttributeProto, NodeProto, TensorProto, attr, elem};

/// The ONNX-ML operator domain (CategoryMapper).
pub const ML: &str = "ai.onnx.ml";

/// A graph under construction.
#[derive(Default)]
pub struct Graph {
    pub nodes: Vec<NodeProto>,
    pub initializers: Vec<TensorProto>,
    next: usize,
}

/// One node attribute.
pub enum Attr<'a> {
    Float(&'a str, f32),
    Int(&'a str, i64),
    Str(&'a str, &'a str),
    Ints(&'a str, Vec<i64>),
    Strs(&'a str, Vec<String>),
}

impl Attr<'_> {
    fn proto(self) -> AttributeProto {
        let mut a = AttributeProto::default();
        match self {
            Attr::Float(n, v) => (a.name, a.f, a.r#type) = (n.into(), v, attr::FLOAT),
            Attr::Int(n, v) => (a.name, a.i, a.r#type) = (n.into(), v, attr::INT),
            Attr::Str(n, v) => (a.name, a.s, a.r#type) = (n.into(), v.into(), attr::STRING),
            Attr::Ints(n, v) => (a.name, a.ints, a.r#type) = (n.into(), v, attr::INTS),
            Attr::Strs(n, v) => {
                a.strings = v.into_iter().map(String::into_bytes).collect();
                (a.name, a.r#type) = (n.into(), attr::STRINGS);
            }
        }
        a
    }
}

impl Graph {
    /// A new value name: `hint` and a number.
    fn fresh(&mut self, hint: &str) -> String {
        self.next += 1;
        format!("{hint}_{}", self.next)
    }

    /// A node of the default domain with one output; returns the output's name.
    pub fn op(&mut self, op: &str, inputs: &[&str], attrs: Vec<Attr>) -> String {
        self.op_in("", op, inputs, attrs)
    }

    /// A node of `domain` with one output; returns the output's name.
    pub fn op_in(&mut self, domain: &str, op: &str, inputs: &[&str], attrs: Vec<Attr>) -> String {
        let out = self.fresh(&op.to_lowercase());
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.clone()],
            name: format!("{out}_node"),
            op_type: op.into(),
            attribute: attrs.into_iter().map(Attr::proto).collect(),
            domain: domain.into(),
        });
        out
    }

    /// Renames the output of the last node to `name` (a graph output).
    pub fn name_last(&mut self, name: &str) -> String {
        let node = self.nodes.last_mut().expect("a node to name");
        node.output[0] = name.into();
        name.into()
    }

    fn constant(&mut self, hint: &str, tensor: TensorProto) -> String {
        let name = self.fresh(hint);
        self.initializers.push(TensorProto {
            name: name.clone(),
            ..tensor
        });
        name
    }

    /// A float constant of shape `dims`.
    pub fn floats(&mut self, hint: &str, dims: &[usize], values: &[f32]) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), values.len());
        let raw = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant(hint, tensor(dims, elem::FLOAT, raw))
    }

    /// A double constant of shape `dims`.
    pub fn doubles(&mut self, hint: &str, dims: &[usize], values: &[f64]) -> String {
        let raw = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant(hint, tensor(dims, elem::DOUBLE, raw))
    }

    /// A scalar double constant (broadcast against any shape).
    pub fn double(&mut self, value: f64) -> String {
        self.doubles("c", &[], &[value])
    }

    /// An int64 constant of shape `dims`.
    pub fn int64s(&mut self, hint: &str, dims: &[usize], values: &[i64]) -> String {
        let raw = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant(hint, tensor(dims, elem::INT64, raw))
    }

    /// `Cast(x, to)`.
    pub fn cast(&mut self, x: &str, to: i32) -> String {
        self.op("Cast", &[x], vec![Attr::Int("to", i64::from(to))])
    }

    /// A binary operator of the default domain (`Add`, `Mul`, `Equal`, ...).
    pub fn bin(&mut self, op: &str, a: &str, b: &str) -> String {
        self.op(op, &[a, b], vec![])
    }

    /// `floor(a / b)` on doubles.
    pub fn floor_div(&mut self, a: &str, b: f64) -> String {
        let b = self.double(b);
        let q = self.bin("Div", a, &b);
        self.op("Floor", &[&q], vec![])
    }

    /// `a * k + c` on doubles.
    pub fn affine(&mut self, a: &str, k: f64, c: f64) -> String {
        let k = self.double(k);
        let c = self.double(c);
        let m = self.bin("Mul", a, &k);
        self.bin("Add", &m, &c)
    }
}

fn tensor(dims: &[usize], data_type: i32, raw_data: Vec<u8>) -> TensorProto {
    TensorProto {
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type,
        raw_data,
        ..Default::default()
    }
}
