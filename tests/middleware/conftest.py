import pytest

from unsee import Unsee


@pytest.fixture
def u(tmp_path):
    inst = Unsee(home=tmp_path / "home")
    yield inst
    inst.close()
