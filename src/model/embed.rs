//! Embedded category columns (`[data.embed]`). Such a column has one input, its level's index
//! (`data::columns`), and a learned table of vectors `[levels + 2, width]` (PyTorch's
//! `nn.Embedding`, drawn from N(0, 1) as it draws them). Before the first layer each index is
//! replaced by its row of the table, in place, so the first layer reads the other inputs and the
//! vectors in the columns' order. A column of a thousand levels then costs the first layer
//! `width` inputs, where one-hot would cost a thousand.

use super::param;
use crate::data::columns::{Encoding, vocabulary};
use burn::module::Param;
use burn::nn::Embedding;
use burn::prelude::*;
use burn::tensor::TensorData;
use std::ops::Range;

/// One stretch of the first layer's inputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Inputs taken as they are.
    Inputs(Range<usize>),
    /// The row of table `table` picked by the index in input `input`.
    Lookup { input: usize, table: usize },
}

/// How a row's inputs become the first layer's: the parts in order, their total width, and
/// each table's `[rows, width]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub parts: Vec<Part>,
    pub width: usize,
    pub tables: Vec<[usize; 2]>,
}

impl Plan {
    /// The plan for inputs encoded by `encodings`; `None` when no column is embedded.
    pub fn of(encodings: &[Encoding]) -> Option<Plan> {
        encodings.iter().find(|e| e.embed.is_some())?;
        let (mut parts, mut width, mut offset) = (Vec::new(), 0, 0);
        let mut tables = Vec::new();
        for enc in encodings {
            let inputs = enc.inputs().len();
            match (enc.embed, vocabulary(enc)) {
                (Some(w), Some(rows)) => {
                    parts.push(Part::Lookup {
                        input: offset,
                        table: tables.len(),
                    });
                    tables.push([rows, w]);
                    width += w;
                }
                _ => {
                    match parts.last_mut() {
                        Some(Part::Inputs(r)) if r.end == offset => r.end += inputs,
                        _ => parts.push(Part::Inputs(offset..offset + inputs)),
                    }
                    width += inputs;
                }
            }
            offset += inputs;
        }
        parts.retain(|p| !matches!(p, Part::Inputs(r) if r.is_empty()));
        Some(Plan {
            parts,
            width,
            tables,
        })
    }

    /// Whether `tables` (loaded from a model file) have the shapes this plan gives them; an
    /// index past a table's end would read another row on a GPU, or stop the CPU backend.
    pub fn check(&self, tables: Option<&[Embedding<impl Backend>]>) -> Result<(), String> {
        let got: Vec<[usize; 2]> = tables
            .unwrap_or_default()
            .iter()
            .map(|t| t.weight.dims())
            .collect();
        match got == self.tables {
            true => Ok(()),
            false => Err(format!(
                "its embedding tables are {got:?} (rows, width), but the config's data.encoding gives {:?}",
                self.tables
            )),
        }
    }
}

/// Each embedded column's table `[vocabulary, width]`, in the columns' order, drawn from the
/// run's seed (a stream of its own, so that the layers draw what they draw without tables).
pub fn tables<B: Backend>(
    encodings: &[Encoding],
    seed: u64,
    device: &B::Device,
) -> Vec<Embedding<B>> {
    let mut rng = crate::rng::stream(seed, "embed", 0);
    (encodings.iter())
        .filter_map(|e| Some((vocabulary(e)?, e.embed?)))
        .map(|(rows, width)| {
            let values: Vec<f32> = (0..rows * width)
                .map(|_| crate::rng::normal(&mut rng) as f32)
                .collect();
            Embedding {
                weight: param(TensorData::new(values, [rows, width]), &mut rng, device),
            }
        })
        .collect()
}

/// The first layer's inputs `[n, plan.width]` from the encoded inputs `x`.
pub fn lookup<B: Backend>(tables: &[Embedding<B>], plan: &Plan, x: Tensor<B, 2>) -> Tensor<B, 2> {
    let n = x.dims()[0];
    let parts = (plan.parts.iter())
        .map(|part| match part {
            Part::Inputs(r) => x.clone().narrow(1, r.start, r.len()),
            Part::Lookup { input, table } => {
                let index = x.clone().narrow(1, *input, 1).reshape([n]).int();
                tables[*table].weight.val().select(0, index)
            }
        })
        .collect();
    Tensor::cat(parts, 1)
}

/// [`lookup`] for K replicas, each with its own tables (`[K, rows, width]` each): the first
/// layer's inputs `[K, n, plan.width]` from each replica's encoded rows `[K, n, inputs]`. The
/// tables are looked up as one `[K * rows, width]` table, each replica's indices moved to its
/// own rows.
pub fn lookup_replicas<B: Backend>(
    tables: &[Param<Tensor<B, 3>>],
    plan: &Plan,
    x: Tensor<B, 3>,
) -> Tensor<B, 3> {
    let [k, n, _] = x.dims();
    let first_rows = |rows: usize| {
        let starts = Tensor::<B, 1, Int>::arange(0..k as i64, &x.device());
        starts.mul_scalar(rows as i64).reshape([k, 1])
    };
    let parts = (plan.parts.iter())
        .map(|part| match part {
            Part::Inputs(r) => x.clone().narrow(2, r.start, r.len()),
            Part::Lookup { input, table } => {
                let [_, rows, width] = tables[*table].dims();
                let index = x.clone().narrow(2, *input, 1).reshape([k, n]).int();
                let index = (index + first_rows(rows)).reshape([k * n]);
                let all = tables[*table].val().reshape([k * rows, width]);
                all.select(0, index).reshape([k, n, width])
            }
        })
        .collect();
    Tensor::cat(parts, 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::columns::ColumnKind;
    use burn::backend::{Autodiff, Flex};

    fn category(name: &str, levels: usize, embed: Option<usize>) -> Encoding {
        Encoding {
            column: name.into(),
            kind: ColumnKind::Category,
            fill: None,
            indicator: false,
            levels: Some((0..levels).map(|l| l.to_string()).collect()),
            embed,
            robust: None,
            bins: None,
        }
    }

    fn numeric(name: &str) -> Encoding {
        Encoding {
            column: name.into(),
            kind: ColumnKind::Numeric,
            fill: Some(0.0),
            indicator: true,
            levels: None,
            embed: None,
            robust: None,
            bins: None,
        }
    }

    #[test]
    fn the_plan_keeps_the_columns_order_and_merges_neighbouring_inputs() {
        let enc = [
            numeric("a"),               // inputs 0, 1
            category("b", 3, None),     // inputs 2..7
            category("c", 10, Some(4)), // input 7
            category("d", 5, Some(2)),  // input 8
            numeric("e"),               // inputs 9, 10
        ];
        let plan = Plan::of(&enc).unwrap();
        assert_eq!(
            plan.parts,
            [
                Part::Inputs(0..7),
                Part::Lookup { input: 7, table: 0 },
                Part::Lookup { input: 8, table: 1 },
                Part::Inputs(9..11),
            ]
        );
        assert_eq!(plan.width, 7 + 4 + 2 + 2);
        assert_eq!(plan.tables, [[12, 4], [7, 2]]);
        assert_eq!(Plan::of(&enc[..2]), None);
        let tables = tables::<Flex>(&enc, 7, &Default::default());
        assert_eq!(plan.check(Some(&tables)), Ok(()));
        // A table of other rows, or none (a file from another config), is named.
        let err = plan.check(Some(&tables[..1])).unwrap_err();
        assert!(
            err.contains("[[12, 4]]") && err.contains("[[12, 4], [7, 2]]"),
            "{err}"
        );
        assert!(plan.check(None::<&[Embedding<Flex>]>).is_err());
    }

    /// The lookup against Burn's own `Embedding::forward`, and its gradient: each table row
    /// gets the sum of the gradients of the rows that picked it.
    #[test]
    fn lookup_picks_each_rows_vector_and_sums_their_gradients() {
        type A = Autodiff<Flex>;
        let device = Default::default();
        let enc = [numeric("a"), category("c", 3, Some(2))];
        let plan = Plan::of(&enc).unwrap();
        let tables = tables::<A>(&enc, 3, &device);
        // Rows: a, a.missing, c's index (level 2, level 0, "(other)" = 4, level 2).
        let x = Tensor::<A, 2>::from_data(
            TensorData::new(
                vec![
                    1.0f32, 0.0, 2.0, 2.0, 1.0, 0.0, 3.0, 0.0, 4.0, 4.0, 0.0, 2.0,
                ],
                [4, 3],
            ),
            &device,
        );
        let out = lookup(&tables, &plan, x.clone());
        let index =
            Tensor::<A, 2, Int>::from_data(TensorData::new(vec![2i64, 0, 4, 2], [1, 4]), &device);
        let want = tables[0].forward(index).reshape([4, 2]);
        let got = out.clone().narrow(1, 2, 2);
        assert_eq!(got.clone().into_data(), want.into_data());
        assert_eq!(
            out.clone().narrow(1, 0, 2).into_data(),
            x.narrow(1, 0, 2).into_data()
        );
        let grads = got.sum().backward();
        let g = tables[0].weight.grad(&grads).unwrap().into_data();
        let g: Vec<f32> = g.to_vec().unwrap();
        assert_eq!(g, [1.0, 1.0, 0.0, 0.0, 2.0, 2.0, 0.0, 0.0, 1.0, 1.0]);
    }

    /// Each replica looks up its own tables, as its single model would.
    #[test]
    fn replicas_look_up_their_own_tables() {
        let device = Default::default();
        let enc = [category("c", 3, Some(2)), numeric("a")];
        let plan = Plan::of(&enc).unwrap();
        let singles = [
            tables::<Flex>(&enc, 1, &device),
            tables::<Flex>(&enc, 2, &device),
        ];
        let stacked = Tensor::stack(singles.iter().map(|t| t[0].weight.val()).collect(), 0);
        let stacked = [Param::from_tensor(stacked)];
        // Replica 0's rows, then replica 1's: index, a, a.missing.
        let rows = [
            [4.0f32, 0.5, 0.0, 1.0, 0.25, 1.0],
            [0.0, 0.75, 0.0, 3.0, 1.0, 0.0],
        ];
        let x = |r: usize| {
            Tensor::<Flex, 2>::from_data(TensorData::new(rows[r].to_vec(), [2, 3]), &device)
        };
        let both = Tensor::stack(vec![x(0), x(1)], 0);
        let got = lookup_replicas(&stacked, &plan, both);
        for (r, single) in singles.iter().enumerate() {
            let want = lookup(single, &plan, x(r)).into_data();
            let mine = got.clone().narrow(0, r, 1).reshape([2, 4]).into_data();
            assert_eq!(mine, want, "replica {r}");
        }
    }
}
