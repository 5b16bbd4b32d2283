"""Real camera sample data, fetched not bundled: registry (URL + sha256 per file), fetching into a
cache, the sample frames, and the real-camera bag built from them (docs/sample_data.md).

``python -m depth3dseg_ros.samples bag`` prints the path of the real-camera bag (building it
first); ``… fetch`` fetches every file and prints the cache root.
"""

from depth3dseg_ros.samples.fetcher import SampleDataUnavailable, cache_dir, fetch, fetch_all

__all__ = ['SampleDataUnavailable', 'cache_dir', 'fetch', 'fetch_all', 'real_camera_bag']


def real_camera_bag(scale: float = 0.5):
    """See :func:`depth3dseg_ros.samples.realbag.real_camera_bag` (imported lazily: it needs
    rosbags)."""
    from depth3dseg_ros.samples.realbag import real_camera_bag as build

    return build(scale)
