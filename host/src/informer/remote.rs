//! Where a bounded watch reads its evicted objects from: GETs and paginated LISTs of the
//! watch's own scope, cut to its [`Shape`]. A metadata-only watch asks the API server for
//! metadata alone (`PartialObjectMetadata`), as its watch does, so an object's content (a
//! Secret's data) never enters the process through a refetch either.

use std::sync::Arc;

use kube::Client;
use kube::api::{Api, ApiResource, ListParams, PartialObjectMeta, TypeMeta};
use prometheus_client::metrics::counter::Counter;

use super::Shape;
use crate::object::ObjectKey;
use crate::wire::{Object, Wire};

/// Objects of a LIST's first page, kube's: the API server answers a page at a time, and the
/// host holds one page of the answer's text at a time. The pages after it are sized by their
/// bytes, as the watches' ([`super::paging`]).
pub const PAGE: u32 = 500;

/// The API a bounded watch refetches from.
pub struct Remote {
    client: Client,
    resource: ApiResource,
    /// The watch's namespace; `None` for all namespaces.
    namespace: Option<String>,
    /// The watch's selectors.
    list: ListParams,
    shape: Shape,
    /// LIST requests made (pages).
    lists: Counter,
}

impl Remote {
    /// The API of the objects of `resource` in `namespace` that `list` selects, cut to `shape`;
    /// every LIST page requested counts in `lists`. Lists of several namespaces at once size
    /// their pages by each other's: objects of one kind and scope.
    pub fn new(
        client: Client,
        resource: ApiResource,
        namespace: Option<String>,
        list: ListParams,
        shape: Shape,
        lists: Counter,
    ) -> Self {
        Self { client: super::paging::paged(client), resource, namespace, list, shape, lists }
    }

    fn api<K>(&self, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<DynamicType = ApiResource, Scope = kube::core::DynamicResourceScope>,
    {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.resource),
            None => Api::all_with(self.client.clone(), &self.resource),
        }
    }

    fn object_of(&self, meta: PartialObjectMeta<Object>) -> Object {
        let types = TypeMeta { api_version: self.resource.api_version.clone(), kind: self.resource.kind.clone() };
        Object { types: Some(types), metadata: meta.metadata, data: Default::default() }
    }

    fn fit(&self, mut object: Object) -> Arc<Object> {
        self.shape.fit(&mut object);
        Arc::new(object)
    }

    /// The object `key` as the API server has it now (a quorum read); `None` if it is gone.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<Arc<Object>>, kube::Error> {
        let namespace = key.namespace.as_deref();
        let object = if self.shape.metadata_only() {
            let api: Api<Object> = self.api(namespace);
            api.get_metadata_opt(&key.name).await?.map(|meta| self.object_of(meta))
        } else {
            let api: Api<Wire> = self.api(namespace);
            api.get_opt(&key.name).await?.map(Wire::into_inner)
        };
        Ok(object.map(|o| self.fit(o)))
    }

    /// Every object of the watch's scope, narrowed to `namespace` when the watch spans all of
    /// them, listed [`PAGE`] objects in the first request and pages sized by their bytes after.
    pub async fn list(&self, namespace: Option<&str>) -> Result<Vec<Arc<Object>>, kube::Error> {
        let namespace = self.namespace.as_deref().or(namespace);
        let mut params = self.list.clone().limit(PAGE);
        let mut objects = Vec::new();
        loop {
            self.lists.inc();
            let next = if self.shape.metadata_only() {
                let api: Api<Object> = self.api(namespace);
                let page = api.list_metadata(&params).await?;
                objects.extend(page.items.into_iter().map(|meta| self.fit(self.object_of(meta))));
                page.metadata.continue_
            } else {
                let api: Api<Wire> = self.api(namespace);
                let page = api.list(&params).await?;
                objects.extend(page.items.into_iter().map(|o| self.fit(o.into_inner())));
                page.metadata.continue_
            };
            match next.filter(|token| !token.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(objects),
            }
        }
    }
}
