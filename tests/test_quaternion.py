"""The quaternion algebra of ukjax._quaternion against its definitions: the rotation is
p (0, v) p-bar by Hamilton products written out here, the cross product numpy's."""

import jax
import jax.numpy as jnp
import numpy as np

from ukjax import _quaternion as quat


def hamilton(a, b):
    """The Hamilton product, term by term (scalar first)."""
    aw, av, bw, bv = a[0], a[1:], b[0], b[1:]
    return np.concatenate([[aw * bw - av @ bv], aw * bv + bw * av + np.cross(av, bv)])


def test_products_rotations_and_cross_products_match_their_definitions():
    rng = np.random.default_rng(3)
    p = rng.standard_normal((5, 4))  # not normalised: the formulas are smooth extensions
    q = rng.standard_normal((5, 4))
    v = rng.standard_normal((5, 3))
    conj = p * np.array([1.0, -1.0, -1.0, -1.0])
    for i in range(5):
        np.testing.assert_allclose(quat.multiply(p[i], q[i]), hamilton(p[i], q[i]), atol=1e-14)
        rotated = hamilton(hamilton(p[i], np.concatenate([[0.0], v[i]])), conj[i])[1:]
        np.testing.assert_allclose(quat.rotate(p[i], v[i]), rotated, atol=1e-13)
        unit = p[i] / np.linalg.norm(p[i])
        on_sphere = hamilton(hamilton(unit, np.concatenate([[0.0], v[i]])), unit * [1, -1, -1, -1])
        np.testing.assert_allclose(quat.rotate_unit(unit, v[i]), on_sphere[1:], atol=1e-13)
        np.testing.assert_allclose(quat.rotation_matrix(p[i]) @ v[i], rotated, atol=1e-13)
    # batched, broadcast, and under vmap
    np.testing.assert_allclose(quat.cross(p[:, 1:], v), np.cross(p[:, 1:], v), atol=1e-14)
    np.testing.assert_allclose(quat.rotate_unit(p[:, None], v[None]).shape, (5, 5, 3))
    np.testing.assert_allclose(jax.vmap(quat.rotate)(p, v), quat.rotate(p, v), atol=1e-14)
    unit = p[0] / np.linalg.norm(p[0])
    R = quat.rotation_matrix(jnp.asarray(unit))
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-14)
