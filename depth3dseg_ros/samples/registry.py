"""Registry of the real camera sample files: where each comes from (public repository at a pinned
commit), its sha256, and its licence.

The package redistributes none of these files; ``depth3dseg_ros.samples.fetcher`` downloads them on
first use (or copies them from a local mirror) into a cache and verifies every checksum. A file's
registry name is ``<source>/<path in that repository>``, so the cache (and any local mirror) is
laid out as ``<root>/<source>/<path>``, and its URL is ``RAW_BASE/<repo>/<commit>/<path>``.

Image content: NYU Depth v2 (Silberman et al., ECCV 2012; research use), TUM RGB-D (Sturm et al.,
IROS 2012; CC BY 4.0), frames found in the repositories below (whose own licences are listed).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Default download base (GitHub's raw-file host); ``DEPTH3DSEG_SAMPLE_URL`` replaces it (a
#: mirror).
RAW_BASE = 'https://raw.githubusercontent.com'


@dataclass(frozen=True)
class Source:
    """One public repository the sample files come from: ``repo`` 'owner/name', the pinned
    ``commit`` (40 hex digits) and the repository's ``licence`` as it states it."""

    repo: str
    commit: str
    licence: str


# one entry per source or file, its hash on its own line: kept out of the formatter
# fmt: off
SOURCES: dict[str, Source] = {
    'densedepth_nyu_test_rgb': Source('ialhashim/DenseDepth',
                                      '2e15107d3b944b702a7512089ca041e8e4c58124',
                                      'GPL-3.0 (repository); NYU Depth v2 content, research use'),
    'depth2hha_nyu_demo': Source('charlesCXK/Depth2HHA-python',
                                 '6c7c14bd151d927d9ea15639556a83b3b179b75e',
                                 'MIT (repository); NYU Depth v2 content, research use'),
    'light_weight_refinenet_nyu': Source('DrSleep/light-weight-refinenet',
                                         '538fe8b39327d8343763b859daf7b9d03a05396e',
                                         'BSD-2 style, non-commercial; NYU Depth v2 content, '
                                         'research use'),
    'metric3d_demo': Source('YvanYin/Metric3D', 'eb5b6fac0dc155e4e52f576e304fbf11655ff339',
                            'BSD-2-Clause (repository); NYU Depth v2 content, research use'),
    'multi_task_refinenet_nyu': Source('DrSleep/multi-task-refinenet',
                                       '1986999759dfac7d38ed9ccddda5d4f5ba488e82',
                                       'BSD-2 style, non-commercial; NYU Depth v2 content, '
                                       'research use'),
    'nyuv2_meta_data_13class_labels': Source('ankurhanda/nyuv2-meta-data',
                                             'b92d15c506876dada1ac4086938e30ebc4deb49b',
                                             'no licence file; labels derived from NYU Depth v2, '
                                             'research use'),
    'open3d_testdata_rgbd_other_formats': Source('mikiec84/Open3D',
                                                 '879b6fc55110504f64c06cf5172da1df6f94a0e8',
                                                 'MIT (Open3D); TUM RGB-D content, CC BY 4.0'),
    'rcnn_depth_nyu_demo': Source('s-gupta/rcnn-depth', '7a7baf7dcccc6fdf6be7c13d16828064d89dff4e',
                                  'Simplified BSD (repository); NYU Depth v2 content, '
                                  'research use'),
    'slambook_rgbd': Source('gaoxiang12/slambook', '853abac78495533dfbe3e4e8d4619017111d5842',
                            'MIT (repository); NYU / TUM RGB-D content'),
}

#: Registry name -> sha256 of the file as published at the pinned commit.
FILES: dict[str, str] = {
    'densedepth_nyu_test_rgb/examples/1_image.png':
        '21288e32b543328bf38a5714cad41d582e731913ad83005b4884bfb707ab40ef',
    'densedepth_nyu_test_rgb/examples/119_image.png':
        'f54a1ff1c5405be10c185c17200d08e9c08f2cc0e6979c4543dbca662f8886d5',
    'densedepth_nyu_test_rgb/examples/140_image.png':
        '5afa07d4947c0d25c51e3cb57841411500be63035a870166da15f83275c0b9f2',
    'densedepth_nyu_test_rgb/examples/267_image.png':
        '757c5a808e3da0d58bbd7c90664c143cdf3e648e860a914c8af958f96c10b5b6',
    'densedepth_nyu_test_rgb/examples/308_image.png':
        'b46beebbdf6d33869cb67e783cbcc665eb432535b3da011a4050254813a0e81c',
    'densedepth_nyu_test_rgb/examples/377_image.png':
        'a8ab9bb862ae91d1cfa1eb18b6cecc50dba54f4226147f0ccec71b4ef8365142',
    'depth2hha_nyu_demo/demo/0.png':
        '4d448420f7879d39ab1e92d292134991863316705e1346e2103d11ff0891f79b',
    'depth2hha_nyu_demo/demo/0_raw.png':
        '8a813187a7caa7e4c5236c02c75183311a6fb3e80fd904f0a1776be764e328ee',
    'light_weight_refinenet_nyu/examples/imgs/NYU/000834.png':
        '63d34ec04a7b4ba9063941685c8516640d7d4adfc4c00743bc7ee14b4e82d754',
    'light_weight_refinenet_nyu/examples/imgs/NYU/000972.png':
        '718aea3d854e886736c84fe5df6246a8bb1a11a8308a7e02053a562723d0e1cd',
    'light_weight_refinenet_nyu/examples/imgs/NYU/001096.png':
        'ad2c9b11b98a635d36c478d387023f1298419f94d514e9d6eaa80b4cafca3d37',
    'metric3d_demo/data/nyu_demo/depth/sync_depth_00000.png':
        '043e9c8bee7af97afff01e451da3f5e9cd1591995f415944dd0dc91036a35b5a',
    'metric3d_demo/data/nyu_demo/depth/sync_depth_00050.png':
        '53c764e869f61cf4240586395bc7374dcc02e65b8442801b53b74ffa563d30fe',
    'metric3d_demo/data/nyu_demo/depth/sync_depth_00100.png':
        'dc0c16d56bfdcc958f37fa28bcf39b110a14c317bfe3c221b3c3bc6d73dec67d',
    'metric3d_demo/data/nyu_demo/rgb/rgb_00000.jpg':
        '6744e744ac4702446d5be32ea13c8e3f884d004ccc288d3c6202484af0ccec1f',
    'metric3d_demo/data/nyu_demo/rgb/rgb_00050.jpg':
        'b931aa5de8008a47c9764edd82ccb1226a53674bed4a8a69ce6e17a9c6974121',
    'metric3d_demo/data/nyu_demo/rgb/rgb_00100.jpg':
        '6295b189ce4e4b939f49451f9a6ff0562600eb9ec1d8ab910b0422d6203a4e75',
    'metric3d_demo/data/nyu_demo/test_annotations.json':
        'f0c46b8b774809059bd2cdc3a1a3c080c687ea6032bb0e02904ea1723bc5b52a',
    'multi_task_refinenet_nyu/examples/ExpNYUD_joint/000464.png':
        '035fb53747e2baa17cd61ce2e90cbafae7fedcbe4857fa4ab12074f0b3ae5ea7',
    'multi_task_refinenet_nyu/examples/ExpNYUD_joint/depth_gt_000464.png':
        '5ea207e35789d3d18312373be0f25e98cc33b13b07baf5c294f66063709a1281',
    'nyuv2_meta_data_13class_labels/test_labels_13/nyuv2_test_class13.tgz':
        'b36668f3872703ef8e58fa02ad3c599213c45666e005df1e843849f189278802',
    'open3d_testdata_rgbd_other_formats/examples/TestData/RGBD/other_formats/TUM_color.png':
        'a84f24b35cfa73f3180d63a6f6068cbae637ff5c3612c8ef05882ce3979607cc',
    'open3d_testdata_rgbd_other_formats/examples/TestData/RGBD/other_formats/TUM_depth.png':
        'a27d96e82731bc84a7af16704837ff7c5492c132ca875af6dcf47685ee6c94a4',
    'rcnn_depth_nyu_demo/demo-data/images.png':
        '26aff7d6770a7ef80b8f23882c1c06fbfe51fac3fbc273763060191a5eab744a',
    'rcnn_depth_nyu_demo/demo-data/depth.png':
        '58df19cda40d256507f97151407270199d96987ea0a735486d980dda3f8a9751',
    'rcnn_depth_nyu_demo/demo-data/rawdepth.png':
        'c6a50001332efac80501371a729bf9cef42561385ad23beee5c40be7141be750',
    'slambook_rgbd/ch5/joinMap/color/1.png':
        '07756976d509bd82dfa1d9201b828ca2319da419ebda5f1009d4ea1bc7284b2e',
    'slambook_rgbd/ch5/joinMap/color/2.png':
        'c8b91988f4e149a3c0ccde58fc8be682d6cbde903f311c72cf626fdcad656fb1',
    'slambook_rgbd/ch5/joinMap/color/3.png':
        '0b675c34f09e694f515090ad838e4a6327cf4414773035bab303f7578a29f99b',
    'slambook_rgbd/ch5/joinMap/color/4.png':
        '48f75e50531ca655155fad2658e9f5ff92dae4c5daa3940898053286038b189c',
    'slambook_rgbd/ch5/joinMap/color/5.png':
        'bde1c22257b932e28e69a01830354a7eb06ff4833c2de3ae137ca6e17f6a4007',
    'slambook_rgbd/ch5/joinMap/depth/1.pgm':
        'bf77478aa2e92b72396f6072612eb7f346d67859e519c3f05ab5330daeb5161e',
    'slambook_rgbd/ch5/joinMap/depth/2.pgm':
        'a9d53c6a029aae31551ac2a945ad923138b4f118ead0a6bda6f3925d608c4975',
    'slambook_rgbd/ch5/joinMap/depth/3.pgm':
        '1edad0ea405293da99a33860a4fcb0836019b926aef796f2040ecb8b9681c5da',
    'slambook_rgbd/ch5/joinMap/depth/4.pgm':
        '79c8c3dfb4dd94fd6d9d9771ffd9d66fe2980ab69c0d47b3530106abb45c3eb1',
    'slambook_rgbd/ch5/joinMap/depth/5.pgm':
        'f1685fe3fe0640f810b284cac37925ac20e8d4d16ae6ee1d79440f1297e471dd',
    'slambook_rgbd/ch7/1.png':
        '19a37c42b247b44d9b63d25ee763ac4e4e589dc666ee065eb96014953ed860ab',
    'slambook_rgbd/ch7/2.png':
        'cba6e199694b67a1945ca069e7861ec4ceb7e39ad88c915623448583e3dc3c4c',
    'slambook_rgbd/ch7/1_depth.png':
        'c643a222539691e4fe6376899ce58f9fe6dce5b4011b941ec07f7bc4a29453ac',
    'slambook_rgbd/ch7/2_depth.png':
        '2d6f747856da23f69a37cd11dc34e51d000518df47f5c52e49235bca5de3032d',
}
# fmt: on


def source_of(name: str) -> Source:
    """The Source of registry name ``name``. Raises KeyError naming it if unknown."""
    if name not in FILES:
        raise KeyError(f'sample file {name!r} is not in the registry')
    return SOURCES[name.split('/', 1)[0]]


def url_of(name: str, base: str = RAW_BASE) -> str:
    """Download URL of registry name ``name`` under ``base``
    (``<base>/<repo>/<commit>/<path>``)."""
    src = source_of(name)
    return f"{base.rstrip('/')}/{src.repo}/{src.commit}/{name.split('/', 1)[1]}"
