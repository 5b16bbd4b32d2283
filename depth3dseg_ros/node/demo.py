"""``make demo`` / ``depth3dseg-demo --out demo_out``: the node on the real-camera bag, end to end.

0. finds the bag: ``--bag``, else the real-camera bag of ``depth3dseg_ros.samples`` (22 real
   NYU/TUM frames, fetched by URL + sha256 into a cache and built there on first use); offline,
   with neither a cache nor a local copy, it renders a synthetic bag on the spot instead and says
   so; a bag without the colour image and CameraInfo topics stops here (exit 2);
   ``--out`` must be a new or empty folder, or one this demo made (its ``.depth3dseg-demo``
   marker): what the demo wrote there before is cleared; anything else there is refused (exit 2);
1. starts ``depth3dseg_node`` in a subprocess (the shipped model, or ``--model``), on its own
   ROS_DOMAIN_ID unless one is set, with the LARGE_DATA transport (depth3dseg_ros.rosenv);
2. waits until the node has loaded the model (its transient-local ``~/classes`` message arrives)
   and the recorder's subscriptions have matched the node's outputs;
3. starts ``depth3dseg-replay`` (subprocess) for the bag's colour image and CameraInfo topics (and
   the ground-truth depth and labels), which waits until the node subscribes its camera_info
   (``--wait-for``) and is **paced by the node** (``--pace``): each image goes out once the node's
   labels of the previous one arrived, so every frame of the bag comes out however slow or loaded
   the machine (the node keeps its newest-frame behaviour; it is just never given two at once),
   and the report's figures are the same from run to run; waits for the replay to finish;
4. records every output in this process (reliable subscriptions, deep queues: nothing is lost
   here), plus the replayed input images (their arrival time is the input time for the latency);
5. writes ``--out`` (node/demo_report.py): per frame the overlay and mask with the class legend,
   the depth on one scale (0 to the model's max depth, colour bar in metres) and a side-by-side
   panel; ``figures.json`` (the run-independent figures), ``report.json``, ``report.md`` and
   ``index.html`` (frames in/out, accuracy against the bag's ground truth, rate, latency p50/p95,
   the node's per-stage timings from /diagnostics), ``cloud.ply``.

Every subprocess runs with a timeout; a missing model or bag stops with one clear line (exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


from depth3dseg_ros.clihelp import DefaultsHelpFormatter
from depth3dseg_ros.paths import share_file
from depth3dseg_ros.procutil import (
    RUNNING,
    STARTING,
    STOPPING,
    StopRequested,
    StopSignals,
    popen_tied,
)
from depth3dseg_ros.rosenv import apply_ros_env, pick_domain_id

from depth3dseg_ros.node.demo_record import (
    GT_DEPTH_TOPIC,
    GT_LABELS_TOPIC,
    IMAGE_TOPIC,
    INFO_TOPIC,
    NODE,
    Recorder,
)
from depth3dseg_ros.node.demo_out import model_max_depth, prepare_out
from depth3dseg_ros.node.demo_report import write_report


def _find(parts: tuple[str, ...], given: str | None, what: str) -> Path:
    if given:
        path = Path(given)
        if not path.exists():
            raise FileNotFoundError(f'{what} {str(path)!r} not found')
        return path
    try:
        return share_file(*parts)
    except FileNotFoundError as err:
        raise FileNotFoundError(
            f'{what} not found ({err}); pass --{what.split()[0]} PATH'
        ) from None


#: what the report says of the data when the real sample frames could not be had
SYNTHETIC_NOTE = (
    'SYNTHETIC frames: the real sample frames were unavailable ({why}), so a synthetic bag was '
    'rendered and replayed instead: these are not real-camera figures (README, model card).'
)


def default_bag(out: Path) -> tuple[Path, str]:
    """The real-camera sample bag and '' ; when the sample files cannot be had (offline, no cache,
    no local copy), a 1-room synthetic bag of 18 frames rendered into ``out/synthetic_bag`` and the
    note the report carries (:data:`SYNTHETIC_NOTE`; also said on stderr)."""
    from depth3dseg_ros.samples import SampleDataUnavailable, real_camera_bag

    try:
        return real_camera_bag(), ''
    except SampleDataUnavailable as err:
        from depth3dseg_ros.synth.cli import generate

        bag = out / 'synthetic_bag'
        shutil.rmtree(bag, ignore_errors=True)
        print(
            f'depth3dseg-demo: real sample frames unavailable ({err}); replaying a synthetic bag '
            f'rendered now instead: {bag}',
            file=sys.stderr,
        )
        generate(bag, scenes=1, frames_per_scene=18, seed=0, noise=True, progress=False)
        return bag, SYNTHETIC_NOTE.format(why=' '.join(str(err).split()))


def run_demo(args: argparse.Namespace, stop: StopSignals | None = None) -> int:
    """Run steps 0-5 of the module docstring; returns the exit code. ``stop``: the process's signal
    handling (main installs it; a signal then raises StopRequested out of the loops, C40)."""
    out = Path(args.out)
    try:
        model = _find(('models', 'depth3dseg_nyu13.pt'), args.model, 'model file')
        bag = _find((), args.bag, 'bag') if args.bag else None
    except FileNotFoundError as err:
        print(f'depth3dseg-demo: {err}', file=sys.stderr)
        return 2
    refused = prepare_out(out)
    if refused:
        print(f'depth3dseg-demo: {refused}', file=sys.stderr)
        return 2
    bag, note = (bag, '') if bag is not None else default_bag(out)
    try:
        max_depth = model_max_depth(model)
    except (OSError, ValueError, KeyError) as err:
        print(f'depth3dseg-demo: model file {model}: {err}', file=sys.stderr)
        return 2
    from depth3dseg_ros.bags.reader import BagReader

    try:
        with BagReader(bag) as reader:
            have = set(reader.topics())
    except ValueError as err:  # an empty directory, not a bag, cannot be opened: bad input
        print(f'depth3dseg-demo: error: {" ".join(str(err).split())}', file=sys.stderr)
        return 2
    if not {IMAGE_TOPIC, INFO_TOPIC} <= have:
        print(
            f'depth3dseg-demo: bag {bag} lacks {IMAGE_TOPIC} / {INFO_TOPIC}; it has '
            f'{sorted(have)}',
            file=sys.stderr,
        )
        return 2
    gt_topics = [t for t in (GT_DEPTH_TOPIC, GT_LABELS_TOPIC) if t in have]
    topics = [IMAGE_TOPIC, INFO_TOPIC] + gt_topics
    if 'ROS_DOMAIN_ID' not in os.environ:
        apply_ros_env(domain_id=pick_domain_id())
    apply_ros_env()
    import rclpy

    node_log = open(out / 'node.log', 'w')
    node_cmd = [
        *(shlex.split(args.node_command) or [sys.executable, '-m', 'depth3dseg_ros.node.main']),
        '--ros-args',
        '-r',
        f'__node:={NODE}',
        '-r',
        f'image:={IMAGE_TOPIC}',
        '-r',
        f'camera_info:={INFO_TOPIC}',
        '-p',
        f'model_file:={model}',
        '-p',
        f'device:={args.device}',
        '-p',
        'diagnostics_period:=1.0',
    ]
    from rclpy.signals import SignalHandlerOptions

    from depth3dseg_ros.departure import interrupted_node, leave_graph

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # signals: procutil.StopSignals
    if stop is not None:
        stop.ros_started = True  # main ends the process with os._exit after the clean-up
        stop.set_phase(STARTING)
    ros = node = replay = None
    try:
        ros = rclpy.create_node('depth3dseg_demo_recorder')
        rec = Recorder(ros, out)
        node = popen_tied(node_cmd, stdout=node_log, stderr=subprocess.STDOUT)
        if stop is not None:
            # raise_running: a signal raises StopRequested out of the loops
            stop.set_phase(RUNNING)
        end = time.monotonic() + args.startup_timeout
        while (
            (rec.classes is None or not rec.outputs_matched())
            and time.monotonic() < end
            and node.poll() is None
        ):
            rclpy.spin_once(ros, timeout_sec=0.1)
        if rec.classes is None or not rec.outputs_matched():
            node_log.flush()
            print(
                f'depth3dseg-demo: the node did not start (see {out / "node.log"}):\n'
                + (out / 'node.log').read_text()[-2000:],
                file=sys.stderr,
            )
            return 1
        # the replay starts once the node has loaded and the recorder hears its outputs; it sends
        # its first frame once the node subscribes (camera_info is the node's alone: the recorder
        # reads the image topic too), then each next one once the node's labels of the previous
        # one came back (--pace): no frame is dropped by a slow node, none is lost here
        replay = popen_tied(
            [
                sys.executable,
                '-m',
                'depth3dseg_ros.bags.replay',
                str(bag),
                '--rate',
                str(args.rate),
                '--topics',
                *topics,
                '--wait-subscribers',
                str(args.startup_timeout + 20),
                '--wait-for',
                INFO_TOPIC,
                '--pace',
                IMAGE_TOPIC,
                f'/{NODE}/labels/image',
                '--pace-timeout',
                str(min(120.0, args.timeout)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        end = time.monotonic() + args.timeout
        while replay.poll() is None and time.monotonic() < end:
            rclpy.spin_once(ros, timeout_sec=0.05)
        if replay.poll() is None:
            print(
                f'depth3dseg-demo: replay did not finish within {args.timeout} s', file=sys.stderr
            )
            return 1
        replay_out = replay.communicate(timeout=10)[0]
        if replay.returncode != 0:
            print(f'depth3dseg-demo: replay failed:\n{replay_out}', file=sys.stderr)
            return 1
        quiet_end, last = (
            time.monotonic() + 3.0,
            len(rec.t_out),
        )  # drain: until 3 s without new output
        while time.monotonic() < quiet_end:
            rclpy.spin_once(ros, timeout_sec=0.05)
            if len(rec.t_out) != last:
                last, quiet_end = len(rec.t_out), time.monotonic() + 3.0
        info = dict(
            bag=str(bag),
            note=note,
            model=str(model),
            rate=args.rate,
            device=args.device,
            domain_id=os.environ.get('ROS_DOMAIN_ID'),
            replay=replay_out.strip().splitlines()[-1:],
        )
        report = write_report(out, rec, info, max_depth)
        print(
            json.dumps(
                {
                    k: report[k]
                    for k in (
                        'frames_in',
                        'frames_out',
                        'fps_out',
                        'latency_ms_p50',
                        'latency_ms_p95',
                        'cloud_ply_points',
                    )
                }
            )
        )
        print(f'depth3dseg-demo: report in {out}/report.md')
        return 0 if report['frames_out'] > 0 else 1
    except StopRequested as err:
        if ros is None:  # the signal came inside create_node: that node leaves below too
            ros = interrupted_node(err)
        raise
    finally:
        if stop is not None:
            stop.set_phase(STOPPING)  # a second signal ends the process at once
        for proc in (replay, node):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # the node and replay end within 2 s (C40)
        for proc in (replay, node):
            if proc is not None:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        node_log.close()
        # the recorder node leaves, the DDS participant is not deleted (that can deadlock on a live
        # TCP peer with FastDDS 3.2, depth3dseg_ros/departure.py); main ends with os._exit
        leave_graph([ros])


def _positive(text: str) -> float:
    """argparse type: a finite number > 0 (else the usage error, exit 2, before anything
    starts)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r} is not a number') from None
    if not 0 < value < float('inf'):
        raise argparse.ArgumentTypeError(f'{text} must be a finite number > 0')
    return value


def build_parser() -> argparse.ArgumentParser:
    """The CLI of ``depth3dseg-demo``."""
    p = argparse.ArgumentParser(
        prog='depth3dseg-demo',
        description=__doc__.split('\n')[0],
        formatter_class=DefaultsHelpFormatter,  # --help shows the defaults
    )
    p.add_argument('--out', default='demo_out', help='report folder (created)')
    p.add_argument(
        '--model',
        default=None,
        help='model file (default: the shipped models/depth3dseg_nyu13.pt)',
    )
    p.add_argument(
        '--bag',
        default=None,
        help='bag (default: the real-camera sample bag, fetched and built on first use)',
    )
    p.add_argument(
        '--node-command',
        default='',
        metavar='CMD',
        help='the command that starts the node, before its --ros-args (default: this Python '
        'with -m depth3dseg_ros.node.main); e.g. a wrapper script that profiles or slows it',
    )
    p.add_argument('--rate', type=_positive, default=1.0, help='replay time scale (> 0)')
    p.add_argument(
        '--device', default='auto', choices=('auto', 'cpu', 'cuda'), help="the node's device"
    )
    p.add_argument(
        '--startup-timeout', type=_positive, default=120.0, help='s to wait for the node to load'
    )
    p.add_argument(
        '--timeout', type=_positive, default=600.0, help='s to wait for the replay to finish'
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``depth3dseg-demo``. SIGINT/SIGTERM at any moment: the node and replay
    children are stopped and the demo ends within about 2 s, exit 0, no traceback (C40, C45;
    procutil.StopSignals). Once rclpy has started, ends the process itself (``os._exit``, output
    flushed) instead of returning: its recorder node has left the graph, and its DDS participant
    must not be deleted while a peer may be alive (depth3dseg_ros/departure.py)."""
    stop = StopSignals('depth3dseg-demo', raise_running=True)
    try:
        rc = run_demo(build_parser().parse_args(argv), stop)
    except StopRequested:
        rc = stop.EXIT_CODE
    finally:
        stop.finished()
        stop.restore()
    if getattr(stop, 'ros_started', False):
        stop.exit_now(rc)  # the DDS participant stays until the process ends (departure.py)
    return rc


if __name__ == '__main__':
    sys.exit(main())
