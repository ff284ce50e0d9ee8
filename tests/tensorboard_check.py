"""Reads a run folder's TensorBoard event files with TensorBoard's own EventAccumulator and
prints every scalar as JSON: {tag: [[step, value], ...]}. Fails when a tag repeats a step.

Usage: python tensorboard_check.py RUN_DIR
"""
import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["scalars"]:
        points = [[e.step, e.value] for e in acc.Scalars(tag)]
        steps = [p[0] for p in points]
        assert len(steps) == len(set(steps)), f"{tag}: repeated steps {steps}"
        out[tag] = points
    print(json.dumps(out))


if __name__ == "__main__":
    main()
