"""``srcore serve MODEL --on ray``: the model behind HTTP on Ray Serve, with dynamic batching."""
from __future__ import annotations

import sys
import time

NAME = "serve"
HELP = "serve a model over HTTP on Ray Serve (JSON or .npy/.npz bodies, dynamic batching, /health)"


def configure_parser(parser) -> None:
    from ._common import add_model_arguments
    from .flags import float_in, int_at_least, positive_float, positive_int
    from .output import add_format_argument

    add_model_arguments(parser)
    parser.add_argument("--on", choices=("ray",), default="ray", help="the serving engine (default: ray)")
    parser.add_argument("--address", metavar="ADDR",
                        help="a running Ray cluster (HOST:6379, ray://HOST:10001, auto); default: a local one, "
                        "stopped with this command")
    parser.add_argument("--host", default="127.0.0.1", help="address the HTTP proxy listens on (default 127.0.0.1)")
    parser.add_argument("--port", type=int_at_least(1), default=8000, help="HTTP port (default 8000)")
    parser.add_argument("--route-prefix", default="/", metavar="PATH", help="URL path of the model (default /)")
    parser.add_argument("--name", default="srcore", help="the Serve application's name (default srcore)")
    parser.add_argument("--replicas", type=positive_int, default=1, metavar="N", help="replicas (default 1)")
    parser.add_argument("--num-cpus", type=positive_float, default=1.0, metavar="C", help="CPUs per replica (default 1)")
    parser.add_argument("--max-batch-size", type=positive_int, default=32, metavar="N",
                        help="most requests per model call (default 32)")
    parser.add_argument("--batch-wait-timeout-s", type=float_in(0.0), default=0.01, metavar="S",
                        help="how long a batch waits for more requests (default 0.01)")
    parser.add_argument("--transfer", choices=("copy", "path"), default="copy",
                        help="how the model reaches the replicas: copy (default) or path (a shared filesystem)")
    parser.add_argument("--detach", action="store_true",
                        help="leave the application running on the cluster and return (needs --address)")
    add_format_argument(parser, what="where the model is served")


def run(args) -> int:
    from ..ray.cluster import require_ray
    from ..ray.serving import serve
    from ._common import load_model, make_options
    from .errors import UsageError
    from .output import print_json

    if args.detach and not args.address:
        raise UsageError("--detach leaves the application on a running cluster: give its --address (a local Ray "
                         "started by this command stops with it)")
    if not args.route_prefix.startswith("/"):
        raise UsageError(f"--route-prefix must start with '/', got {args.route_prefix!r}")
    ray = require_ray()
    # a .srm goes to the replicas as it is; other formats are converted here, then sent as a .srm
    model = args.model if args.model.lower().endswith(".srm") else load_model(args.model)
    owned = not ray.is_initialized() and not args.address
    url = serve(model, name=args.name, route_prefix=args.route_prefix, max_batch_size=args.max_batch_size,
                batch_wait_timeout_s=args.batch_wait_timeout_s, num_replicas=args.replicas,
                num_cpus=args.num_cpus, options=make_options(args), transfer=args.transfer,
                host=args.host, port=args.port, address=args.address)
    if args.format == "json":
        print_json({"model": args.model, "name": args.name, "url": url, "health": url + "/health",
                    "detached": args.detach})
    else:
        print(f"serving {args.model} at {url} (health: {url}/health)" + ("" if args.detach else "; Ctrl-C stops"))
    sys.stdout.flush()
    if args.detach:
        return 0
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        from ray import serve as ray_serve

        ray_serve.delete(args.name)
        if owned:
            ray_serve.shutdown()
            ray.shutdown()
        print("stopped", file=sys.stderr)
    return 0
