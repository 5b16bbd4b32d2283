"""Model files (core/modelfile.py): round trip, atomic save, clear errors, crafted pickles
refused."""

import os
import pickle

import pytest
import torch

from depth3dseg_ros.core.classes import NYU13, ClassSet
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import (
    FORMAT,
    ModelFileError,
    load_model,
    read_model_file,
    save_model,
)

SMALL = dict(width=0.35, dec_ch=16, head_ch=8, p_channels=[16, 16], p_head=16, max_depth=8.0)


def _model(n=len(NYU13)):
    torch.manual_seed(0)
    return Depth3DSeg(n, **SMALL).eval()


def _K(w, h):
    return torch.tensor([[[0.8 * w, 0, w / 2], [0, 0.8 * w, h / 2], [0, 0, 1.0]]])


def test_round_trip_same_outputs_and_meta(tmp_path):
    model = _model()
    meta = {
        'classes': NYU13.to_dict(),
        'input_size': [64, 48],
        'mean': [0.5, 0.5, 0.5],
        'std': [0.25, 0.25, 0.25],
        'training': {'epochs': 3, 'best': {'miou': 0.5}},
    }
    path = save_model(tmp_path / 'm.pt', model, meta)
    assert sorted(os.listdir(tmp_path)) == ['m.pt']  # no temporary left behind
    loaded, meta2 = load_model(path)
    assert not loaded.training
    assert meta2['input_size'] == [64, 48] and meta2['mean'] == [0.5, 0.5, 0.5]
    assert meta2['max_depth'] == 8.0 and meta2['arch'] == model.arch
    assert ClassSet.from_dict(meta2['classes']) == NYU13
    assert meta2['training'] == {'epochs': 3, 'best': {'miou': 0.5}} and 'created' in meta2
    x = torch.randn(1, 3, 48, 64)
    with torch.no_grad():
        a, b = model(x, _K(64, 48)), loaded(x, _K(64, 48))
    for key in ('depth', 'seg2d', 'seg3d'):
        assert torch.equal(a[key], b[key])
    raw = read_model_file(path)
    assert raw['format'] == FORMAT and raw['version'] == 1
    assert all(isinstance(v, torch.Tensor) for v in raw['state_dict'].values())


def test_defaults_filled_from_classes_only(tmp_path):
    path = save_model(tmp_path / 'm.pt', _model(), {'classes': NYU13})
    _, meta = load_model(path)
    assert meta['input_size'] == [320, 240] and len(meta['mean']) == 3 and meta['max_depth'] == 8.0


def test_bad_meta_is_refused_before_writing(tmp_path):
    model = _model()
    with pytest.raises(ValueError, match='classes'):
        save_model(tmp_path / 'a.pt', model, {})
    with pytest.raises(ValueError, match='num_classes=14'):
        save_model(
            tmp_path / 'a.pt',
            model,
            {'classes': ClassSet(['void', 'x'], [[0, 0, 0], [1, 2, 3]]).to_dict()},
        )
    with pytest.raises(ValueError, match='input_size'):
        save_model(tmp_path / 'a.pt', model, {'classes': NYU13.to_dict(), 'input_size': [64]})
    with pytest.raises(ValueError, match='std'):
        save_model(tmp_path / 'a.pt', model, {'classes': NYU13.to_dict(), 'std': [0, 1, 1]})
    with pytest.raises(ValueError, match='plain'):
        save_model(
            tmp_path / 'a.pt', model, {'classes': NYU13.to_dict(), 'training': {'x': object()}}
        )
    with pytest.raises(ValueError, match='arch'):
        save_model(tmp_path / 'a.pt', model, {'classes': NYU13.to_dict(), 'arch': {'width': 1.0}})
    assert not any(tmp_path.iterdir())


def test_wrong_format_version_and_missing_keys(tmp_path):
    good = read_model_file(save_model(tmp_path / 'g.pt', _model(), {'classes': NYU13}))
    cases = {
        'format': dict(good, format='something-else'),
        'version': dict(good, version=2),
        "'state_dict'": {k: v for k, v in good.items() if k != 'state_dict'},
        "missing 'arch'": dict(good, meta={k: v for k, v in good['meta'].items() if k != 'arch'}),
    }
    for match, data in cases.items():
        p = tmp_path / 'bad.pt'
        torch.save(data, p)
        with pytest.raises(ModelFileError, match=match):
            load_model(p)
    sd = dict(good['state_dict'])
    sd.pop(next(iter(sd)))
    torch.save(dict(good, state_dict=sd), tmp_path / 'sd.pt')
    with pytest.raises(ModelFileError, match='state_dict does not fit'):
        load_model(tmp_path / 'sd.pt')
    (tmp_path / 'junk.pt').write_bytes(b'not a model at all')
    with pytest.raises(ModelFileError, match='not a depth3dseg model file') as err:
        load_model(tmp_path / 'junk.pt')
    assert 'weights_only=False' not in str(err.value)  # never advise unpickling arbitrary code
    # a file that is no torch file at all says so plainly (was "KeyError: 101" for a text file)
    (tmp_path / 'text.pt').write_text('hello\n')
    with pytest.raises(ModelFileError, match=r"not a torch file: it starts with b'hello\\n'"):
        load_model(tmp_path / 'text.pt')
    # a training checkpoint (what --resume reads) is named as such, with the file to use instead
    torch.save({'model': good['state_dict'], 'optimizer': {}, 'config': {}}, tmp_path / 'last.pt')
    with pytest.raises(ModelFileError, match=r"training checkpoint .*use the run's model.pt"):
        load_model(tmp_path / 'last.pt')
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / 'nope.pt')


class _Payload:
    """A pickle payload that would create a file when unpickled (open(path, 'w'))."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, 'w'))


@pytest.mark.parametrize('writer', ['torch', 'pickle'])
def test_crafted_pickle_is_refused_and_not_run(tmp_path, writer):
    target = tmp_path / 'pwned.txt'
    good = read_model_file(save_model(tmp_path / 'g.pt', _model(), {'classes': NYU13}))
    evil = dict(good)
    evil['meta'] = dict(good['meta'], training={'note': _Payload(target)})
    path = tmp_path / 'evil.pt'
    if writer == 'torch':
        torch.save(evil, path)
    else:
        with open(path, 'wb') as fh:
            pickle.dump(evil, fh, protocol=2)
    # the payload is live: plain unpickling would run it
    assert not target.exists()
    with pytest.raises(ModelFileError, match='weights_only'):
        load_model(path)
    assert not target.exists()
    if writer == 'pickle':
        with open(path, 'rb') as fh:
            pickle.load(fh).get('meta')
        assert target.exists()  # proof the payload would have run
