"""Decoders are the encoders' answer (``Encoder.mirror_decoder``): for every registered encoder, the decoder
``build_decoder`` gives under ``torch.manual_seed(0)`` is the one the former name-and-attribute guessing built
(same class, parameter names, shapes and values), the VAE family's log-variance head takes the declared
``feature_dim``, and an encoder without a mirror gives the same one-line error as before."""

import pytest
import torch
from torch import nn

from ident3d.causal.errors import UserError
from ident3d.training.decoders import build_decoder
from ident3d.training.encoders import ENCODERS, build_encoder
from ident3d.training.objectives import OBJECTIVES

# key -> (encoder name, out_dim, image_size, encoder options, build_decoder keyword arguments)
CASES = {
    "resnet18": ("resnet18", 8, 32, {}, {"width": 32}),
    "cnn": ("cnn", 8, 32, {}, {}),
    "cnn_z4": ("cnn", 8, 16, {}, {"z_dim": 4, "width": 16}),
    "tac_cnn": ("tac_cnn", 8, 84, {}, {"width": 32}),
    "mlp": ("mlp", 5, 0, {"in_dim": 10, "hidden": [32, 16]}, {}),
    "mlp_vae": ("mlp_vae", 6, 28, {"channels": 1, "hidden": [64, 32, 128]}, {}),
    "resnet_vae": ("resnet_vae", 16, 32, {"channels": 1}, {"width": 64}),
    "slot_cnn": ("slot_cnn", 8, 32, {"width": 8, "strides": [1, 2]}, {"width": 32}),
}
NO_DECODER = {"gin": ("gin", 4, 0, {"in_dim": 4, "blocks": 2}, {})}

# Recorded from the former training/decoders.py (getattr on input_kind, sizes, image_size, channels and the registry
# name "mlp_vae"), before encoders gave their own mirror: the encoder built under torch.manual_seed(1), then
# build_decoder(encoder, **kwargs) under torch.manual_seed(0); per parameter, its shape and float64 sum.
OLD_DECODERS = {
    'resnet18': ('ConvDecoder', {
        'fc.weight': ((512, 8), -13.731439597308054),
        'fc.bias': ((512,), -1.8244312564929714),
        'blocks.0.body.0.weight': ((32, 16, 3, 3), 4.940585734739216),
        'blocks.0.body.1.weight': ((16,), 16.0),
        'blocks.0.body.1.bias': ((16,), 0.0),
        'blocks.0.body.3.weight': ((16, 16, 3, 3), -0.10008266546537925),
        'blocks.0.body.4.weight': ((16,), 16.0),
        'blocks.0.body.4.bias': ((16,), 0.0),
        'blocks.0.skip.1.weight': ((16, 32, 1, 1), 1.363646025507478),
        'blocks.0.skip.2.weight': ((16,), 16.0),
        'blocks.0.skip.2.bias': ((16,), 0.0),
        'blocks.1.body.0.weight': ((16, 16, 3, 3), 3.722251730992866),
        'blocks.1.body.1.weight': ((16,), 16.0),
        'blocks.1.body.1.bias': ((16,), 0.0),
        'blocks.1.body.3.weight': ((16, 16, 3, 3), 0.05305385175051924),
        'blocks.1.body.4.weight': ((16,), 16.0),
        'blocks.1.body.4.bias': ((16,), 0.0),
        'blocks.1.skip.1.weight': ((16, 16, 1, 1), 0.7322683930397034),
        'blocks.1.skip.2.weight': ((16,), 16.0),
        'blocks.1.skip.2.bias': ((16,), 0.0),
        'blocks.2.body.0.weight': ((16, 16, 3, 3), 0.28317343928029004),
        'blocks.2.body.1.weight': ((16,), 16.0),
        'blocks.2.body.1.bias': ((16,), 0.0),
        'blocks.2.body.3.weight': ((16, 16, 3, 3), 0.04273665443633945),
        'blocks.2.body.4.weight': ((16,), 16.0),
        'blocks.2.body.4.bias': ((16,), 0.0),
        'blocks.2.skip.1.weight': ((16, 16, 1, 1), -1.18878573179245),
        'blocks.2.skip.2.weight': ((16,), 16.0),
        'blocks.2.skip.2.bias': ((16,), 0.0),
        'out.weight': ((3, 16, 5, 5), -0.07963679018575931),
        'out.bias': ((3,), 0.08759949915111065),
    }),
    'cnn': ('ConvDecoder', {
        'fc.weight': ((4096, 8), 54.29431796434801),
        'fc.bias': ((4096,), -18.370879725247505),
        'blocks.0.body.0.weight': ((256, 128, 3, 3), 0.5051656730574976),
        'blocks.0.body.1.weight': ((128,), 128.0),
        'blocks.0.body.1.bias': ((128,), 0.0),
        'blocks.0.body.3.weight': ((128, 128, 3, 3), 9.052157182480956),
        'blocks.0.body.4.weight': ((128,), 128.0),
        'blocks.0.body.4.bias': ((128,), 0.0),
        'blocks.0.skip.1.weight': ((128, 256, 1, 1), 4.18213177472353),
        'blocks.0.skip.2.weight': ((128,), 128.0),
        'blocks.0.skip.2.bias': ((128,), 0.0),
        'blocks.1.body.0.weight': ((128, 64, 3, 3), -1.2376308775470761),
        'blocks.1.body.1.weight': ((64,), 64.0),
        'blocks.1.body.1.bias': ((64,), 0.0),
        'blocks.1.body.3.weight': ((64, 64, 3, 3), 2.6607511534130026),
        'blocks.1.body.4.weight': ((64,), 64.0),
        'blocks.1.body.4.bias': ((64,), 0.0),
        'blocks.1.skip.1.weight': ((64, 128, 1, 1), 1.9539598813469183),
        'blocks.1.skip.2.weight': ((64,), 64.0),
        'blocks.1.skip.2.bias': ((64,), 0.0),
        'blocks.2.body.0.weight': ((64, 32, 3, 3), -3.7663732567721127),
        'blocks.2.body.1.weight': ((32,), 32.0),
        'blocks.2.body.1.bias': ((32,), 0.0),
        'blocks.2.body.3.weight': ((32, 32, 3, 3), 2.849035389815981),
        'blocks.2.body.4.weight': ((32,), 32.0),
        'blocks.2.body.4.bias': ((32,), 0.0),
        'blocks.2.skip.1.weight': ((32, 64, 1, 1), 0.9408049434423447),
        'blocks.2.skip.2.weight': ((32,), 32.0),
        'blocks.2.skip.2.bias': ((32,), 0.0),
        'out.weight': ((3, 32, 5, 5), 0.6068163062564054),
        'out.bias': ((3,), 0.06105853524059057),
    }),
    'cnn_z4': ('ConvDecoder', {
        'fc.weight': ((256, 4), -0.2125769853591919),
        'fc.bias': ((256,), -5.910757601261139),
        'blocks.0.body.0.weight': ((16, 16, 3, 3), -2.1762500855184044),
        'blocks.0.body.1.weight': ((16,), 16.0),
        'blocks.0.body.1.bias': ((16,), 0.0),
        'blocks.0.body.3.weight': ((16, 16, 3, 3), -0.18243693379918113),
        'blocks.0.body.4.weight': ((16,), 16.0),
        'blocks.0.body.4.bias': ((16,), 0.0),
        'blocks.0.skip.1.weight': ((16, 16, 1, 1), 2.9616770446300507),
        'blocks.0.skip.2.weight': ((16,), 16.0),
        'blocks.0.skip.2.bias': ((16,), 0.0),
        'blocks.1.body.0.weight': ((16, 16, 3, 3), 0.8251763086245774),
        'blocks.1.body.1.weight': ((16,), 16.0),
        'blocks.1.body.1.bias': ((16,), 0.0),
        'blocks.1.body.3.weight': ((16, 16, 3, 3), 1.039543047976622),
        'blocks.1.body.4.weight': ((16,), 16.0),
        'blocks.1.body.4.bias': ((16,), 0.0),
        'blocks.1.skip.1.weight': ((16, 16, 1, 1), -0.6006474792957306),
        'blocks.1.skip.2.weight': ((16,), 16.0),
        'blocks.1.skip.2.bias': ((16,), 0.0),
        'out.weight': ((3, 16, 5, 5), 1.9863710599497608),
        'out.bias': ((3,), -0.06354226544499397),
    }),
    'tac_cnn': ('ConvDecoder', {
        'fc.weight': ((512, 8), -13.731439597308054),
        'fc.bias': ((512,), -1.8244312564929714),
        'blocks.0.body.0.weight': ((32, 16, 3, 3), 4.940585734739216),
        'blocks.0.body.1.weight': ((16,), 16.0),
        'blocks.0.body.1.bias': ((16,), 0.0),
        'blocks.0.body.3.weight': ((16, 16, 3, 3), -0.10008266546537925),
        'blocks.0.body.4.weight': ((16,), 16.0),
        'blocks.0.body.4.bias': ((16,), 0.0),
        'blocks.0.skip.1.weight': ((16, 32, 1, 1), 1.363646025507478),
        'blocks.0.skip.2.weight': ((16,), 16.0),
        'blocks.0.skip.2.bias': ((16,), 0.0),
        'blocks.1.body.0.weight': ((16, 16, 3, 3), 3.722251730992866),
        'blocks.1.body.1.weight': ((16,), 16.0),
        'blocks.1.body.1.bias': ((16,), 0.0),
        'blocks.1.body.3.weight': ((16, 16, 3, 3), 0.05305385175051924),
        'blocks.1.body.4.weight': ((16,), 16.0),
        'blocks.1.body.4.bias': ((16,), 0.0),
        'blocks.1.skip.1.weight': ((16, 16, 1, 1), 0.7322683930397034),
        'blocks.1.skip.2.weight': ((16,), 16.0),
        'blocks.1.skip.2.bias': ((16,), 0.0),
        'blocks.2.body.0.weight': ((16, 16, 3, 3), 0.28317343928029004),
        'blocks.2.body.1.weight': ((16,), 16.0),
        'blocks.2.body.1.bias': ((16,), 0.0),
        'blocks.2.body.3.weight': ((16, 16, 3, 3), 0.04273665443633945),
        'blocks.2.body.4.weight': ((16,), 16.0),
        'blocks.2.body.4.bias': ((16,), 0.0),
        'blocks.2.skip.1.weight': ((16, 16, 1, 1), -1.18878573179245),
        'blocks.2.skip.2.weight': ((16,), 16.0),
        'blocks.2.skip.2.bias': ((16,), 0.0),
        'blocks.3.body.0.weight': ((16, 16, 3, 3), 1.364776093962064),
        'blocks.3.body.1.weight': ((16,), 16.0),
        'blocks.3.body.1.bias': ((16,), 0.0),
        'blocks.3.body.3.weight': ((16, 16, 3, 3), 1.440232946404194),
        'blocks.3.body.4.weight': ((16,), 16.0),
        'blocks.3.body.4.bias': ((16,), 0.0),
        'blocks.3.skip.1.weight': ((16, 16, 1, 1), 4.413523465394974),
        'blocks.3.skip.2.weight': ((16,), 16.0),
        'blocks.3.skip.2.bias': ((16,), 0.0),
        'out.weight': ((3, 16, 5, 5), 0.9767155665977043),
        'out.bias': ((3,), -0.054066963493824005),
    }),
    'mlp': ('VectorDecoder', {
        'net.0.weight': ((16, 5), -0.4027046540286392),
        'net.0.bias': ((16,), -0.343609057366848),
        'net.2.weight': ((32, 16), -1.0613893270492554),
        'net.2.bias': ((32,), 0.020612478256225586),
        'net.4.weight': ((10, 32), 1.2306246580264997),
        'net.4.bias': ((10,), -0.06561201997101307),
    }),
    'mlp_vae': ('MLPDecoder', {
        'net.0.weight': ((128, 6), -0.7781559899594868),
        'net.0.bias': ((128,), 1.6211243291036226),
        'net.2.weight': ((32, 128), -5.074079114034248),
        'net.2.bias': ((32,), -0.3157153991051018),
        'net.4.weight': ((64, 32), 6.57148108437832),
        'net.4.bias': ((64,), -0.6726723131723702),
        'net.6.weight': ((784, 64), 15.096614927053452),
        'net.6.bias': ((784,), -4.780813679099083),
    }),
    'resnet_vae': ('ConvDecoder', {
        'fc.weight': ((1024, 16), 13.787780344486237),
        'fc.bias': ((1024,), 2.4042005240917206),
        'blocks.0.body.0.weight': ((64, 32, 3, 3), 3.2386317958803374),
        'blocks.0.body.1.weight': ((32,), 32.0),
        'blocks.0.body.1.bias': ((32,), 0.0),
        'blocks.0.body.3.weight': ((32, 32, 3, 3), -1.0584838937993482),
        'blocks.0.body.4.weight': ((32,), 32.0),
        'blocks.0.body.4.bias': ((32,), 0.0),
        'blocks.0.skip.1.weight': ((32, 64, 1, 1), -2.79255773127079),
        'blocks.0.skip.2.weight': ((32,), 32.0),
        'blocks.0.skip.2.bias': ((32,), 0.0),
        'blocks.1.body.0.weight': ((32, 16, 3, 3), -1.9897691594496791),
        'blocks.1.body.1.weight': ((16,), 16.0),
        'blocks.1.body.1.bias': ((16,), 0.0),
        'blocks.1.body.3.weight': ((16, 16, 3, 3), 3.429951975180302),
        'blocks.1.body.4.weight': ((16,), 16.0),
        'blocks.1.body.4.bias': ((16,), 0.0),
        'blocks.1.skip.1.weight': ((16, 32, 1, 1), 1.2735127483028919),
        'blocks.1.skip.2.weight': ((16,), 16.0),
        'blocks.1.skip.2.bias': ((16,), 0.0),
        'blocks.2.body.0.weight': ((16, 16, 3, 3), 0.5228576560293732),
        'blocks.2.body.1.weight': ((16,), 16.0),
        'blocks.2.body.1.bias': ((16,), 0.0),
        'blocks.2.body.3.weight': ((16, 16, 3, 3), -2.9213604237374966),
        'blocks.2.body.4.weight': ((16,), 16.0),
        'blocks.2.body.4.bias': ((16,), 0.0),
        'blocks.2.skip.1.weight': ((16, 16, 1, 1), 0.5131614506244659),
        'blocks.2.skip.2.weight': ((16,), 16.0),
        'blocks.2.skip.2.bias': ((16,), 0.0),
        'out.weight': ((1, 16, 5, 5), -0.21781143921543844),
        'out.bias': ((1,), -0.0050646900199353695),
    }),
}

# Same source, the vae objective (hparams: decoder_width = the case's width) built under torch.manual_seed(0):
# (logvar_head Linear weight shape, its weight sum, its bias sum, the decoder's summed parameters, objective.channels).
# The weight shape's second entry is the feature width the former code found as the last Linear's in_features.
OLD_VAE = {
    'resnet18': ((8, 100), -0.5057669363486639, 0.14298341571702622, 139.45576965122973, 3),
    'cnn': ((8, 100), -0.5057669363486639, 0.14298341571702622, 731.198559081141, 3),
    'tac_cnn': ((8, 200), -0.9540279938846652, 0.06167702889069915, 203.0297386533898, 3),
    'mlp': ((5, 16), -0.2251186966896057, -0.02336445450782776, -2.025675802404294, 3),
    'mlp_vae': ((6, 128), -0.16847570952086244, -0.04762989841401577, 10.621096535061952, 1),
    'resnet_vae': ((16, 1024), 1.7234725430607796, 0.018885329365730286, 210.7173901247511, 1),
}


def _encoder(key: str) -> nn.Module:
    name, out_dim, size, options, _ = {**CASES, **NO_DECODER}[key]
    torch.manual_seed(1)
    return build_encoder(name, out_dim, size, **options)


def _fingerprint(module: nn.Module) -> dict[str, tuple[tuple[int, ...], float]]:
    return {n: (tuple(p.shape), float(p.detach().double().sum())) for n, p in module.named_parameters()}


def test_the_cases_cover_every_registered_encoder():
    assert {c[0] for c in (*CASES.values(), *NO_DECODER.values())} == set(ENCODERS.names())


@pytest.mark.parametrize("key", sorted(OLD_DECODERS))
def test_decoder_is_the_one_the_former_code_built(key):
    enc = _encoder(key)
    torch.manual_seed(0)
    dec = build_decoder(enc, **CASES[key][4])
    cls, want = OLD_DECODERS[key]
    got = _fingerprint(dec)
    assert type(dec).__name__ == cls
    assert list(got) == list(want)
    for name, (shape, total) in want.items():
        assert got[name][0] == shape, name
        assert got[name][1] == pytest.approx(total, rel=1e-6, abs=1e-9), name


@pytest.mark.parametrize("key", sorted(OLD_DECODERS))
def test_build_decoder_asks_the_encoder(key):
    enc = _encoder(key)
    kw = CASES[key][4]
    torch.manual_seed(0)
    asked = enc.mirror_decoder(kw.get("z_dim", enc.out_dim), width=kw.get("width", 256))
    torch.manual_seed(0)
    built = build_decoder(enc, **kw)
    assert type(asked) is type(built)
    assert all(torch.equal(a, b) for a, b in zip(asked.state_dict().values(), built.state_dict().values(), strict=True))


@pytest.mark.parametrize("key", sorted(OLD_VAE))
def test_vae_heads_are_the_ones_the_former_code_built(key):
    enc = _encoder(key)
    width = CASES[key][4].get("width")
    torch.manual_seed(0)
    obj = OBJECTIVES.get("vae")(enc, **({"decoder_width": width} if width else {}))
    shape, w_sum, b_sum, dec_sum, channels = OLD_VAE[key]
    lv = obj.logvar_head[1]
    assert tuple(lv.weight.shape) == shape
    assert float(lv.weight.detach().double().sum()) == pytest.approx(w_sum, rel=1e-6)
    assert float(lv.bias.detach().double().sum()) == pytest.approx(b_sum, rel=1e-6)
    assert sum(v[1] for v in _fingerprint(obj.decoder).values()) == pytest.approx(dec_sum, rel=1e-6)
    assert obj.channels == channels
    assert lv.in_features == enc.feature_dim  # the declared width, no longer found by probing for the last Linear


@pytest.mark.parametrize("key", sorted({**CASES, **NO_DECODER}))
def test_feature_dim_is_the_width_of_features(key):
    enc = _encoder(key).eval()
    size, in_dim = enc.image_size, {**CASES, **NO_DECODER}[key][3].get("in_dim")
    x = torch.randn(2, 3, size, size) if enc.input_kind == "image" else torch.randn(2, in_dim)
    with torch.no_grad():
        assert enc.features(x).shape == (2, enc.feature_dim)


OLD_MESSAGE = ("encoder {} does not record its image size, so no decoder can be built for it; use --encoder mlp_vae "
               "(28 px), resnet_vae (32/64 px), cnn or resnet18 with the generative objectives")


class _Bare(nn.Linear):
    """Not an Encoder: a plain module with an output size, as tests pass to objectives."""

    def __init__(self):
        super().__init__(4, 4)
        self.out_dim = 4


@pytest.mark.parametrize("make, name", [(lambda: _encoder("gin"), "gin"), (_Bare, "_Bare"),
                                        (lambda: build_encoder("cnn", 4, 0), "cnn")])
def test_an_encoder_without_a_mirror_gives_the_one_line_error(make, name):
    for build in (lambda e: build_decoder(e), lambda e: OBJECTIVES.get("vae")(e)):
        with pytest.raises(UserError) as err:
            build(make())
        assert str(err.value) == OLD_MESSAGE.format(name) and "\n" not in str(err.value)
