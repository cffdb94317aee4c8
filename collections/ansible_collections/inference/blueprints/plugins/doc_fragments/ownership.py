# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ownership option of the modules that apply, compare or remove a site's objects (module_utils/ownership.py)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  ownership:
    description:
      - What a site created, so that nothing it did not create is taken over or deleted. With O(ownership.value)
        set, every object an apply creates gets the annotation O(ownership.annotation) with that value and keeps it
        on every later apply.
      - An object that already exists without it (or with another value) stops an apply before its first write,
        naming each such object, unless it matches an entry of O(ownership.adopt); an adopted object is applied as it
        is and never annotated.
      - A removal (C(state=absent) of M(inference.blueprints.k8s_apply)) deletes only the objects that carry the
        annotation with O(ownership.value) and reports the others with the action V(kept) and the reason; it gives
        back the fields the site set on an adopted object.
      - When the task gives no O(ownership), the action plugin uses the policy of the host's deployment intent (the
        site's name and its C(adopt) variable), when one is known. V({}) turns it off.
    type: dict
    default: {}
    suboptions:
      annotation:
        description: The annotation that marks what the site created.
        type: str
        default: inference.blueprints/created-by
      value:
        description: The site's name (the annotation's value).
        type: str
      adopt:
        description:
          - Objects that exist and may be taken over, as C(Kind/name) or C(Kind/namespace/name); a whole part may be
            C(*).
        type: list
        elements: str
        default: []
      derived:
        description:
          - Objects a controller made for one of the site's objects and that go with it, as C(Kind/namespace/name)
            (the CSV OLM installed for one of the site's Subscriptions); a removal deletes them as the site's own,
            unless the object they were made for is a shared one another site still claims.
        type: list
        elements: str
        default: []
      shared:
        description:
          - Platform objects every site of the collection on the cluster shares (decided by the platform intent), each
            as C(ref) (C(Kind/name) or C(Kind/namespace/name)) and C(merge) (a field path to C(union) or C(any)).
          - An apply claims such an object when it is new or carries the collection's annotations (any site's); the
            annotation C(inference.blueprints/claimed-by.<value>) records the claim and the site's contribution, the
            merged fields are the union of every claim, and a field set otherwise by another claimant stops the apply
            before its first write, naming both sites and the field.
          - A removal drops the site's claim and recomputes the merge (action V(released)) while other sites claim the
            object, and deletes it when the site is its last claimant.
        type: list
        elements: dict
        default: []
"""
